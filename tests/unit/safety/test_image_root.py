"""`--root DIR` (not /) without `--netns` is an image tree (issue 26 #11): no command runs
on the host. systemctl restarts are deferred to the node's first boot, kubeadm and the
like refused, any other command the image holds runs inside it (chroot); `plan` says
which for each command."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from agent import cli, commands
from agent.errors import PermanentError, Reason
from agent.host import Host

TIME_CONFIG = {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
               "spec": {"time": {"servers": [{"host": "192.0.2.123"}],
                                 "syncTimeout": "1s"},
                        "retry": {"attempts": 1}}}


@pytest.fixture
def spy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """systemctl and kubeadm on this host's PATH that record being run (they must not
    be); the suite's test hook that lets --root trees run commands is off."""
    monkeypatch.delenv(commands.COMMANDS_ON_HOST_ENV, raising=False)
    bin_dir, calls = tmp_path / "host-bin", tmp_path / "host-calls"
    bin_dir.mkdir()
    for name in ("systemctl", "kubeadm", "chronyc"):
        (bin_dir / name).write_text(f"#!/bin/sh\necho {name} \"$@\" >> {calls}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return calls


def test_plan_on_an_image_tree_says_what_becomes_of_each_command(
        tmp_path: Path, spy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "image"
    (root / "etc/machine-agent").mkdir(parents=True)
    (root / "etc/machine-agent/config.yaml").write_text(yaml.safe_dump(TIME_CONFIG))
    assert cli.main(["--root", str(root), "plan", "--only", "time"]) == 0
    out = capsys.readouterr().out
    assert f"commands: {root} is an image tree (--root without --netns)" in out
    assert "~ restart chronyd: systemctl restart chrony\n    [deferred to first boot: " in out
    assert not spy.exists()


def test_run_on_an_image_tree_runs_nothing_on_the_host(
        tmp_path: Path, spy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "image"
    (root / "etc/machine-agent").mkdir(parents=True)
    (root / "etc/machine-agent/config.yaml").write_text(yaml.safe_dump(TIME_CONFIG))
    code = cli.main(["--root", str(root), "run", "--only", "time"])
    captured = capsys.readouterr()
    assert not spy.exists(), spy.read_text()  # neither systemctl nor chronyc ran here
    assert (root / "etc/chrony/chrony.conf").exists()  # the files are the image's
    # the restart is deferred; the clock of an image cannot be read: refused, named
    assert code in (1, 3), captured.out + captured.err  # not done: the clock is unknown
    assert "chronyc -n -c tracking: chronyc changes or reads the running node" in \
        captured.out + captured.err


def test_a_host_only_program_is_refused_and_a_restart_deferred(tmp_path: Path,
                                                               spy: Path) -> None:
    host = Host(tmp_path / "image", image=True)
    result = host.systemctl("restart", "chrony")
    assert result.ok and "deferred to first boot" in result.stdout
    with pytest.raises(PermanentError, match="kubeadm changes or reads the running node"):
        host.run(["kubeadm", "join", "--config", "/run/kubeadm/kubeadm-join-config.yaml"])
    with pytest.raises(PermanentError, match="has no curl to run"):
        host.run(["curl", "-sS", "https://example.net"])
    assert not spy.exists()
    assert host.effects.recent == ["defer systemctl restart chrony"]


def _tiny_image(root: Path) -> None:
    """/bin/sh and the libraries it needs, copied into `root`: an image that can run it."""
    sh = os.path.realpath("/bin/sh")
    libs = subprocess.run(["ldd", sh], capture_output=True, text=True, check=True).stdout
    for path in [sh, *(w for line in libs.splitlines() for w in line.split()
                      if w.startswith("/"))]:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    (root / "bin").mkdir(exist_ok=True)
    if not (root / "bin/sh").exists():
        shutil.copy2(sh, root / "bin/sh")


@pytest.mark.allow_processes  # ldd, and the chroot
@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root (CI runs as root)")
def test_a_command_the_image_holds_runs_inside_it(tmp_path: Path) -> None:
    root = tmp_path / "image"
    _tiny_image(root)
    host = Host(root, image=True)
    assert host.command_disposition(["sh", "-c", "true"])[0] == "chroot"
    host.run(["sh", "-c", "echo inside > /marker"])
    assert (root / "marker").read_text() == "inside\n"
    assert not Path("/marker").exists()


def test_a_refusal_on_an_image_tree_reads_as_one_not_as_an_internal_error(
        tmp_path: Path, spy: Path) -> None:
    host = Host(tmp_path / "image", image=True)
    with pytest.raises(PermanentError) as err:
        host.run(["kubeadm", "join", "--config", "/run/kubeadm/kubeadm-join-config.yaml"])
    assert err.value.reason == Reason.NotOnImage  # not InternalError's "report it"
    assert "first boot" in str(err.value) and "report" not in str(err.value).lower()
