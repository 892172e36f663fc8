"""The systemd units as systemd reads them: `systemd-analyze verify` without a single
warning (it exits 0 on warnings, so stderr is what counts), and the kill switch."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.host import CommandResult, Host

REPO = Path(__file__).parents[3]
UNITS = REPO / "units"
AGENT_UNIT = "machine-agent.service"


def analyze(*args: str, env: dict[str, str] | None = None) -> CommandResult:
    return Host("/", read_only=True).run(["systemd-analyze", *args], mutates=False,
                                         check=False, env=env)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A system root where the units are installed as the image installs them, next to
    systemd's own units, with the binaries their ExecStart= name (verify checks them)."""
    root = tmp_path / "root"
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system",
                    symlinks=True)
    system = root / "usr/lib/systemd/system"
    shutil.copy(UNITS / AGENT_UNIT, system)
    for dropins in UNITS.glob("*.service.d"):
        shutil.copytree(dropins, system / dropins.name, dirs_exist_ok=True)
    # kubelet.service as kubeadm's packages ship it (kubernetes/release:
    # cmd/krel/templates/latest/kubelet/kubelet.service), to verify the drop-in against.
    (system / "kubelet.service").write_text(
        "[Unit]\nDescription=kubelet: The Kubernetes Node Agent\n"
        "Documentation=https://kubernetes.io/docs/\nWants=network-online.target\n"
        "After=network-online.target\n\n[Service]\nExecStart=/usr/bin/kubelet\n"
        "Restart=always\nStartLimitInterval=0\nRestartSec=10\n\n"
        "[Install]\nWantedBy=multi-user.target\n")
    (root / "lib").symlink_to("usr/lib")  # merged /usr, as on Debian bookworm
    for binary in ("opt/machine-agent/bin/machine-agent", "usr/bin/kubelet",
                   "usr/lib/systemd/systemd-networkd-wait-online"):
        path = root / binary
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    return root


def verify(root: Path, unit: str) -> CommandResult:
    return analyze("verify", f"--root={root}", str(root / "usr/lib/systemd/system" / unit))


@pytest.mark.parametrize("unit", [AGENT_UNIT, "kubelet.service",
                                  "systemd-networkd-wait-online.service"])
def test_units_verify_without_any_warning(root: Path, unit: str) -> None:
    result = verify(root, unit)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_a_mistake_in_the_unit_would_be_caught(root: Path) -> None:
    unit = root / "usr/lib/systemd/system" / AGENT_UNIT
    unit.write_text(unit.read_text().replace("NoNewPrivileges=", "NoNewPrivilege="))
    result = verify(root, AGENT_UNIT)
    assert "Unknown key 'NoNewPrivilege'" in result.stderr


def test_the_unit_is_a_notify_service_running_the_daemon(root: Path) -> None:
    text = (UNITS / AGENT_UNIT).read_text()
    assert "\nType=notify\n" in text
    assert "\nExecStart=/opt/machine-agent/bin/machine-agent daemon\n" in text


def test_kernel_command_line_flag_keeps_the_agent_from_starting(root: Path) -> None:
    def conditions(cmdline: str) -> CommandResult:
        return analyze("condition", f"--root={root}", f"--unit={AGENT_UNIT}",
                       env={"SYSTEMD_PROC_CMDLINE": cmdline})

    assert conditions("root=/dev/vda console=ttyS0").returncode == 0
    off = conditions("root=/dev/vda machine-agent.disabled console=ttyS0")
    assert off.returncode == 1
    assert "ConditionKernelCommandLine=!machine-agent.disabled failed" in off.stderr


def test_the_disabled_file_keeps_the_agent_from_starting(tmp_path: Path) -> None:
    # `condition --root` checks paths on the real /: evaluate the unit's own line with
    # the path moved under the test directory instead.
    line = next(x for x in (UNITS / AGENT_UNIT).read_text().splitlines()
                if x.startswith("ConditionPathExists="))
    assert line == "ConditionPathExists=!/etc/machine-agent/disabled"
    moved = line.replace("!/etc/", f"!{tmp_path}/etc/")
    assert analyze("condition", moved).returncode == 0
    (tmp_path / "etc/machine-agent").mkdir(parents=True)
    (tmp_path / "etc/machine-agent/disabled").touch()
    assert analyze("condition", moved).returncode == 1


def test_kubelet_waits_for_the_configuration_join_writes(root: Path) -> None:
    def kubelet_conditions() -> CommandResult:
        return analyze("condition", f"--root={root}", "--unit=kubelet.service")

    result = kubelet_conditions()
    assert "ConditionPathExists=/var/lib/kubelet/config.yaml" in result.stderr
    # Never ordered after the agent: kubeadm restarts kubelet from inside our start-up.
    drop_in = (UNITS / "kubelet.service.d/10-machine-agent.conf").read_text()
    assert not [x for x in drop_in.splitlines() if x.startswith(("After=", "Requires="))]


def test_wait_online_is_skipped_until_a_network_configuration_exists(root: Path) -> None:
    result = analyze("condition", f"--root={root}",
                     "--unit=systemd-networkd-wait-online.service")
    assert "ConditionDirectoryNotEmpty=|/etc/systemd/network" in result.stderr
    assert "ConditionDirectoryNotEmpty=|/run/systemd/network" in result.stderr
