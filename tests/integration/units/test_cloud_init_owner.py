"""One owner of the bootstrap data: on a boot where the agent runs, cloud-init discards
the user-data (CABPK's bootstrap data, which the agent carries out); where the agent is
switched off, it does not. Checked with systemd's own tools and cloud-init's own code
(Debian's cloud-init in the system Python)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent.host import Host
from tests.integration.units.test_unit_files import UNITS, analyze, verify
from tests.integration.units.test_unit_files import root as agent_root

GUARD = "machine-agent-cloud-init.service"
__all__ = ["agent_root"]  # the fixture, used by name below


@pytest.fixture
def root(agent_root: Path) -> Path:
    shutil.copy(UNITS / GUARD, agent_root / "usr/lib/systemd/system")
    (agent_root / "bin").symlink_to("usr/bin")  # merged /usr; what ExecStart= names
    for binary in ("mkdir", "sh", "cloud-init"):
        path = agent_root / "usr/bin" / binary
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    return agent_root


def test_the_guard_and_cloud_inits_drop_in_verify_without_any_warning(root: Path) -> None:
    for unit in (GUARD, "cloud-init.service"):
        result = verify(root, unit)
        assert result.returncode == 0 and result.stderr == "", (unit, result.stderr)


@pytest.mark.parametrize(("cmdline", "runs"), [
    ("root=/dev/vda console=ttyS0", True),
    ("root=/dev/vda machine-agent.disabled console=ttyS0", False),
])
def test_the_guard_runs_exactly_when_the_agent_does(root: Path, cmdline: str,
                                                    runs: bool) -> None:
    env = {"SYSTEMD_PROC_CMDLINE": cmdline}
    for unit in (GUARD, "machine-agent.service"):
        result = analyze("condition", f"--root={root}", f"--unit={unit}", env=env)
        assert (result.returncode == 0) is runs, (unit, result.stderr)
    guard = [x for x in (UNITS / GUARD).read_text().splitlines()
             if x.startswith("Condition")]
    agent = [x for x in (UNITS / "machine-agent.service").read_text().splitlines()
             if x.startswith("Condition")]
    assert guard == agent  # the same kill switch, file and kernel command line


def guard_config() -> str:
    """What the guard writes as cloud-init's configuration, from its ExecStart= line."""
    line = next(x for x in (UNITS / GUARD).read_text().splitlines()
                if "cloud-init.cfg'" in x and x.startswith("ExecStart="))
    return line.split("echo \"", 1)[1].split("\" >", 1)[0] + "\n"


def merged_cloud_init_config(tmp_path: Path, env_file: str | None) -> dict[str, object]:
    """cloud-init's own merge (cloudinit/helpers.py ConfigMerger) of a user-data
    cloud-config that asks for user-data, under the environment the drop-in gives."""
    instance = tmp_path / "instance"
    instance.mkdir(exist_ok=True)
    (instance / "cloud-config.txt").write_text("#cloud-config\nallow_userdata: true\n"
                                               "runcmd: [kubeadm join]\n")
    script = (
        "import json, sys\n"
        "from cloudinit import helpers\n"
        "class Paths:\n"
        "    def get_ipath_cur(self, name):\n"
        f"        return {str(instance / 'cloud-config.txt')!r} if name == 'cloud_config'"
        " else None\n"
        "merger = helpers.ConfigMerger(paths=Paths(), datasource=None, additional_fns=[],"
        " base_cfg={}, include_vendor=False)\n"
        "print(json.dumps(merger.cfg))\n")
    env = {"PATH": "/usr/bin:/bin"}
    if env_file is not None:
        env["CLOUD_CFG"] = env_file
    result = Host("/", read_only=True).run(["/usr/bin/python3", "-c", script], mutates=False,
                                          env=env)
    merged: dict[str, object] = json.loads(result.stdout)
    return merged


def test_cloud_init_discards_user_data_under_the_guards_configuration_whatever_it_says(
        tmp_path: Path) -> None:
    config = tmp_path / "cloud-init.cfg"
    config.write_text(guard_config())
    assert guard_config() == "allow_userdata: false\n"
    on = merged_cloud_init_config(tmp_path, str(config))
    assert on["allow_userdata"] is False  # the user-data's own `true` does not win
    off = merged_cloud_init_config(tmp_path, None)  # the agent switched off: no env file
    assert off["allow_userdata"] is True and off["runcmd"] == ["kubeadm join"]
