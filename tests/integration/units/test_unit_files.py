"""The systemd units as systemd reads them: `systemd-analyze verify` without a single
warning (it exits 0 on warnings, so stderr is what counts), and the kill switch."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from agent.host import CommandResult, Host

REPO = Path(__file__).parents[3]
UNITS = REPO / "units"
AGENT_UNIT = "machine-agent.service"
BOOTSTRAP_UNIT = "machine-agent-bootstrap.service"
"""The oneshot whose state is the bootstrap's outcome (`systemctl --failed`)."""


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
    for unit in UNITS.glob("*.service"):
        shutil.copy(unit, system)
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


@pytest.mark.parametrize("unit", [AGENT_UNIT, BOOTSTRAP_UNIT, "kubelet.service",
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


def _names(item: str) -> tuple[str, list[str]]:
    """An open item of `systemd-analyze security` as (setting, the values it names):
    `CapabilityBoundingSet=~CAP_NET_(BIND_SERVICE|RAW)` gives CapabilityBoundingSet and
    NET_BIND_SERVICE, NET_RAW; `User=/DynamicUser=` gives User and no values."""
    setting, _, value = item.partition("=")
    value = value.removeprefix("~")
    if not value or value.startswith("/"):
        return setting, []
    grouped = re.fullmatch(r"(.*?)\((.*)\)", value)
    values = ([grouped.group(1) + alt for alt in grouped.group(2).split("|")] if grouped
              else [value])
    return setting, [v.removeprefix("CAP_") for v in values]


def test_every_open_exposure_is_justified_in_a_comment(root: Path) -> None:
    """Each exposure `systemd-analyze security` leaves open is either a setting the unit
    sets, with the comment above it naming the value it opens (@mount, AF_PACKET,
    NET_ADMIN, ...), or a bullet of the unit's "Left open, on purpose" list."""
    from bench.unit_security import parse

    text = (UNITS / AGENT_UNIT).read_text()
    _, left = parse(analyze("security", "--offline=yes", f"--root={root}", "--no-pager",
                            AGENT_UNIT).stdout)
    assert left, "systemd-analyze security found nothing open: the parse is broken"
    lines = text.splitlines()
    start = lines.index("# Left open, on purpose:")
    bullets = {name for line in lines[start:] if line.startswith("# - ")
               for name in re.findall(r"\w+", line[4:].partition(":")[0])}
    missing = []
    for item in left:
        setting, values = _names(item)
        at = next((i for i, line in enumerate(lines) if line.startswith(f"{setting}=")),
                  None)
        if at is None:
            if setting not in bullets and not (setting == "RootDirectory"
                                               and "RootImage" in bullets):
                missing.append(item)
            continue
        above = []
        for line in reversed(lines[:at]):
            if not line.startswith("#"):
                break
            above.append(line)
        comment = " ".join(above)
        if not any(v in comment for v in values):
            missing.append(item)
    assert not missing, f"open without a justification in {AGENT_UNIT}: {missing}"


def unit_settings(name: str) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in (UNITS / name).read_text().splitlines():
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


def test_the_bootstrap_unit_shares_the_kill_switch_and_is_not_ordered_after_the_daemon(
        root: Path) -> None:
    gate, daemon = unit_settings(BOOTSTRAP_UNIT), unit_settings(AGENT_UNIT)
    for condition in ("ConditionPathExists", "ConditionKernelCommandLine"):
        assert gate[condition] == daemon[condition]
    assert (gate["Type"], gate["RemainAfterExit"]) == (["oneshot"], ["yes"])
    # Beside the daemon, following the run: After= would wait for the daemon's READY=1.
    assert "After" not in gate and gate["Wants"] == [AGENT_UNIT]
    assert gate["WantedBy"] == ["multi-user.target"]
    off = analyze("condition", f"--root={root}", f"--unit={BOOTSTRAP_UNIT}",
                  env={"SYSTEMD_PROC_CMDLINE": "root=/dev/vda machine-agent.disabled"})
    assert off.returncode == 1


@pytest.mark.allow_processes
@pytest.mark.parametrize(("outcome", "unit_result"), [
    ("bootstrapped", "success"), ("degraded", "success"), ("failed", "failed"),
    ("no run", "failed")])
def test_the_bootstrap_unit_fails_exactly_when_the_node_did_not_bootstrap(
        tmp_path: Path, outcome: str, unit_result: str) -> None:
    """Its ExecStart=, run against a node's state, and systemd's rule for a oneshot's
    result: exit 0 or a SuccessExitStatus= is success, anything else `failed`."""
    import subprocess
    import sys

    from agent.config import load_config
    from agent.errors import PermanentError, Reason
    from agent.orchestrator import Orchestrator
    from agent.phases.base import Phase, PhaseContext, PhasePlan
    from agent.report import LocalStatus

    class Time(Phase):
        name, condition, success = "time", "TimeSynchronized", Reason.TimeSynchronized

        def plan(self, ctx: PhaseContext) -> PhasePlan:
            if outcome == "failed":
                raise PermanentError("no server answered", reason=Reason.TimeNotSynchronized)
            return PhasePlan(self.name)

        def reason(self, result: dict[str, object]) -> Reason:
            return Reason.TimeNotSynchronized if outcome == "degraded" else self.success

    if outcome != "no run":
        host = Host(tmp_path)
        Orchestrator(load_config(host, []), host, phases=[Time()],
                     reporters=[LocalStatus(host)]).run()
    gate = unit_settings(BOOTSTRAP_UNIT)
    (command,) = gate["ExecStart"]
    argv = command.split()
    assert argv[:3] == ["/opt/machine-agent/bin/machine-agent", "status", "--wait"]
    timeout = "0" if outcome == "no run" else argv[argv.index("--timeout") + 1]
    done = subprocess.run([sys.executable, "-m", "agent.cli", "--root", str(tmp_path),
                           "status", "--wait", "--timeout", timeout], capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    success = {0, *(int(code) for code in " ".join(gate["SuccessExitStatus"]).split())}
    assert ("success" if done.returncode in success else "failed") == unit_result, done
