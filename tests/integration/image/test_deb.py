"""The release's .deb (images/build.sh deb), installed with dpkg into a copy of the golden
image's debootstrap tree as an image build does: the agent runs from its venv under
/opt/machine-agent with the pinned dependencies, the units are enabled and not started,
the default configuration is valid and a conffile, and removal and purge leave nothing
of it behind."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).parents[3]
pytestmark = pytest.mark.allow_processes


def run(argv: list[str], timeout: float = 600) -> str:
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert proc.returncode == 0, f"{argv[:4]} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return proc.stdout


def test_the_version_says_which_commit_it_was_built_from(deb: Path) -> None:
    """At the release's tag the release's version; from any other commit one that dpkg
    orders after the release and after every earlier commit's."""
    version = run(["dpkg-deb", "--field", str(deb), "Version"]).strip()
    assert deb.name == f"machine-agent_{version}_amd64.deb"
    version = version.removesuffix("+deb12")  # the distribution it is built for
    head = run(["git", "rev-parse", "HEAD"]).strip()
    tagged = subprocess.run(["git", "describe", "--tags", "--exact-match"], cwd=REPO,
                            capture_output=True, text=True, check=False).stdout.strip()
    if tagged == "v0.1.0":
        assert version == "0.1.0"
        return
    base, _, build = version.partition("+git")
    count, _, sha = build.partition(".g")
    assert base == "0.1.0" and head.startswith(sha) and len(sha) == 12
    assert int(count) == int(run(["git", "rev-list", "--count", "HEAD"]))
    earlier = f"0.1.0+git{int(count) - 1}.g{'f' * 12}"
    for older in ("0.1.0", earlier):
        assert subprocess.run(["dpkg", "--compare-versions", version, "gt", older],
                              check=False).returncode == 0, older


def test_the_package_holds_the_venv_units_and_a_default_config(deb: Path) -> None:
    info = run(["dpkg-deb", "--field", str(deb), "Package", "Depends"])
    assert "python3 (>= 3.11), python3 (<< 3.12)" in info  # bookworm's
    assert "libc6 (>= " in info  # what its compiled modules link
    files = {line.split()[5].removeprefix(".") for line in
             run(["dpkg-deb", "--contents", str(deb)]).splitlines()}
    for path in ("/opt/machine-agent/bin/machine-agent", "/usr/bin/machine-agent",
                 "/usr/lib/systemd/system/machine-agent.service",
                 "/usr/lib/systemd/system/machine-agent-bootstrap.service",
                 "/usr/lib/systemd/system/kubelet.service.d/10-machine-agent.conf",
                 "/etc/machine-agent/config.yaml", "/usr/share/doc/machine-agent/README.md"):
        assert path in files, path
    assert not [f for f in files if f.endswith(".pyc")]  # postinst compiles in place
    assert not [f for f in files if "/pip/" in f]  # nothing installs into it later
    conffiles = run(["dpkg-deb", "--info", str(deb), "conffiles"]).split()
    assert "/etc/machine-agent/config.yaml" in conffiles


def test_installed_into_the_image_tree_enabled_not_started_and_removed_cleanly(
        deb: Path, tmp_path: Path) -> None:
    base = run(["bash", "images/build.sh", "base"]).strip()
    tree = tmp_path / "tree"
    run(["cp", "-a", base, str(tree)])
    run(["cp", str(deb), str(tree / "tmp")])
    run(["chroot", str(tree), "dpkg", "-i", f"/tmp/{deb.name}"])
    assert run(["chroot", str(tree), "machine-agent", "--version"]) == "machine-agent 0.1.0\n"
    # the dependencies exactly as requirements/runtime.txt pins them
    frozen = run(["chroot", str(tree), "/opt/machine-agent/bin/python", "-c",
                  "from importlib.metadata import version as v; "
                  "print(v('requests'), v('Jinja2'), v('PyYAML'))"]).split()
    pins = (REPO / "requirements/runtime.txt").read_text()
    for name, got in zip(("requests", "jinja2", "pyyaml"), frozen, strict=True):
        assert f"\n{name}=={got} \\" in pins, (name, got)
    assert list((tree / "opt/machine-agent/lib").rglob("__pycache__"))  # compiled
    wants = tree / "etc/systemd/system/multi-user.target.wants"
    for unit in ("machine-agent.service", "machine-agent-bootstrap.service"):
        assert os.readlink(wants / unit) == f"/lib/systemd/system/{unit}" or \
            os.readlink(wants / unit).endswith(f"/systemd/system/{unit}")
    assert not (tree / "var/lib/machine-agent").exists()  # not started: no run, no state
    assert "valid" in run(["chroot", str(tree), "machine-agent", "config", "validate",
                           "/etc/machine-agent/config.yaml"])

    run(["chroot", str(tree), "dpkg", "--remove", "machine-agent"])
    assert not (tree / "opt/machine-agent").exists()
    assert (tree / "etc/machine-agent/config.yaml").exists()  # a conffile stays on remove
    (tree / "var/lib/machine-agent").mkdir(parents=True)  # as a run would have left it
    run(["chroot", str(tree), "dpkg", "--purge", "machine-agent"])
    assert not (tree / "etc/machine-agent/config.yaml").exists()
    assert not (tree / "var/lib/machine-agent").exists()
    assert not (wants / "machine-agent.service").exists()


def _installed(deb: Path, tmp_path: Path) -> Path:
    base = run(["bash", "images/build.sh", "base"]).strip()
    tree = tmp_path / "tree"
    run(["cp", "-a", base, str(tree)])
    run(["cp", str(deb), str(tree / "tmp")])
    run(["chroot", str(tree), "dpkg", "-i", f"/tmp/{deb.name}"])
    return tree


def test_an_upgrade_restarts_a_running_daemon_on_the_new_code(deb: Path,
                                                              tmp_path: Path) -> None:
    """Upgraded on a running system, the daemon is restarted (try-restart: a stopped one
    stays stopped). systemd's tools are stand-ins inside the tree that write down what
    they were asked: nothing reaches this machine's systemd."""
    tree = _installed(deb, tmp_path)
    (tree / "run/systemd/system").mkdir(parents=True)  # "a running system"
    calls = tree / "tmp/calls"
    (tree / "usr/local/sbin").mkdir(parents=True, exist_ok=True)
    for tool in ("deb-systemd-invoke", "systemctl"):
        stub = tree / "usr/local/sbin" / tool
        stub.write_text(f"#!/bin/sh\necho {tool} \"$@\" >> /tmp/calls\n")
        stub.chmod(0o755)
    run(["chroot", str(tree), "dpkg", "-i", f"/tmp/{deb.name}"])  # the same version again
    asked = calls.read_text().splitlines()
    assert "deb-systemd-invoke try-restart machine-agent.service" in asked
    assert "systemctl --system daemon-reload" in asked


def test_purge_keeps_the_journal_that_records_held_addresses(deb: Path,
                                                             tmp_path: Path) -> None:
    """What `machine-agent clean` refuses, purge does not do: a journal recording IPAM
    addresses the node holds stays, and dpkg says why and what to do."""
    tree = _installed(deb, tmp_path)
    state = tree / "var/lib/machine-agent"
    state.mkdir(parents=True)
    (state / "journal.json").write_text(json.dumps({"format": 2, "phases": {}, "extra": {
        "ipam": {"key-1": {"plugin": "netbox", "claim_key": "key-1", "pool": "p",
                           "interface": "eth0",
                           "allocation": {"address": "192.0.2.21", "prefix": 24}}}}}))
    proc = subprocess.run(["chroot", str(tree), "dpkg", "--purge", "machine-agent"],
                          capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert (state / "journal.json").exists()
    assert "still holds (192.0.2.21)" in proc.stderr
    assert "machine-agent release-addresses" in proc.stderr
