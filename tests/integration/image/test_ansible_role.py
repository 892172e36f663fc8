"""The Ansible role (images/ansible/roles/machine_agent), as image-builder would run it,
applied over the chroot connection to a copy of the golden image's debootstrap tree: it
installs the release's .deb (images/build.sh deb), so the agent runs from its venv, its
units, the README they name and the kernel's module and sysctl files are installed, the
agent's units and systemd-networkd enabled, as images/build.sh does; a second run changes
nothing; `machine_agent_enabled: false` leaves the agent off."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).parents[3]
pytestmark = pytest.mark.allow_processes


def run(argv: list[str], timeout: float = 600, **env: str) -> str:
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env}, check=False)
    assert proc.returncode == 0, f"{argv[:3]} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return proc.stdout


def playbook(tmp_path: Path, tree: Path, deb: Path, enabled: bool = True) -> str:
    inventory = tmp_path / "inventory"
    inventory.write_text(f"node ansible_connection=community.general.chroot "
                         f"ansible_host={tree} ansible_python_interpreter=/usr/bin/python3\n")
    play = tmp_path / "play.yml"
    play.write_text("- hosts: all\n  gather_facts: false\n  roles:\n"
                    "    - role: machine_agent\n"
                    f"      machine_agent_deb: {deb}\n"
                    + ("" if enabled else "      machine_agent_enabled: false\n"))
    out = run(["ansible-playbook", "-i", str(inventory), str(play)],
              ANSIBLE_ROLES_PATH=str(REPO / "images/ansible/roles"), ANSIBLE_NOCOLOR="1",
              ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    recap = re.search(r"node\s*: ok=(\d+)\s+changed=(\d+)\s+unreachable=0\s+failed=0", out)
    assert recap, out
    return recap.group(2)


def test_role_installs_and_enables_the_agent_and_is_idempotent(tmp_path: Path,
                                                               deb: Path) -> None:
    base = run(["bash", "images/build.sh", "base"]).strip()
    tree = tmp_path / "tree"
    run(["cp", "-a", base, str(tree)])  # device nodes too (copytree would read /dev/zero)

    assert playbook(tmp_path, tree, deb) != "0"
    version = run(["chroot", str(tree), "/opt/machine-agent/bin/machine-agent", "--version"])
    assert version.startswith("machine-agent ")
    system = tree / "usr/lib/systemd/system"
    for unit_file in (REPO / "units").glob("*.service"):
        assert (system / unit_file.name).read_text() == unit_file.read_text(), unit_file
    for dropin in (REPO / "units").glob("*.service.d/*.conf"):
        installed = system / dropin.parent.name / dropin.name
        assert installed.read_text() == dropin.read_text(), dropin
    wants = tree / "etc/systemd/system/multi-user.target.wants"
    for unit in ("machine-agent.service", "machine-agent-bootstrap.service",
                 "systemd-networkd.service"):
        assert os.readlink(wants / unit).endswith(f"/systemd/system/{unit}"), unit
    # one owner of the bootstrap data: on the agent's boots cloud-init discards user-data
    guard = "machine-agent-cloud-init.service"
    assert os.readlink(tree / "etc/systemd/system/sysinit.target.wants" / guard).endswith(
        f"/systemd/system/{guard}")
    assert "config: disabled" in (tree / "etc/cloud/cloud.cfg.d/99-machine-agent.cfg").read_text()
    assert not (tree / "var/cache/machine-agent-deb").exists()
    assert not (tree / "var/lib/machine-agent").exists()  # enabled, never started
    # What build.sh installs too: the unit's Documentation=, what kubeadm's preflight needs.
    doc = "/usr/share/doc/machine-agent/README.md"
    assert f"file:{doc}" in (REPO / "units/machine-agent.service").read_text()
    assert (tree / doc.lstrip("/")).read_text() == (REPO / "README.md").read_text()
    assert "br_netfilter" in (tree / "etc/modules-load.d/kubernetes.conf").read_text()
    assert "net.ipv4.ip_forward" in (tree / "etc/sysctl.d/99-kubernetes.conf").read_text()
    assert "MACAddressPolicy=none" in (
        tree / "usr/lib/systemd/network/50-cni-links.link").read_text()

    assert playbook(tmp_path, tree, deb) == "0"  # a second run changes nothing

    assert playbook(tmp_path, tree, deb, enabled=False) != "0"
    assert not (wants / "machine-agent.service").exists()
    assert not (wants / "machine-agent-bootstrap.service").exists()
