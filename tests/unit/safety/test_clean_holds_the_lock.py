"""`clean` takes the node lock: it never removes the state of a run in progress, nor the
held lock's file (a second run would lock a new file and start at once beside the
first)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cli import main
from agent.host import Host
from agent.state import JOURNAL, NODE_LOCK, Journal

HOLD = """
import sys, time
from agent.host import Host
from agent.state import node_lock
with node_lock(Host(sys.argv[1]), "run"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


@pytest.fixture
def run_in_progress(tmp_path: Path, request: pytest.FixtureRequest,
                    ) -> Iterator[subprocess.Popen[str]]:
    """A run holding the node lock (for the seconds a test parametrizes it with)."""
    Journal.load(Host(tmp_path)).save()
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path),
                             str(getattr(request, "param", 30))],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait(timeout=10)


@pytest.mark.allow_processes
def test_clean_during_a_run_is_refused_naming_it_and_removes_nothing(
        tmp_path: Path, run_in_progress: subprocess.Popen[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    lock = tmp_path / NODE_LOCK.lstrip("/")
    before = lock.stat().st_ino
    assert main(["--root", str(tmp_path), "clean", "--no-wait"]) == 3
    assert f"pid {run_in_progress.pid}: machine-agent run" in capsys.readouterr().err
    assert (tmp_path / JOURNAL.lstrip("/")).exists()
    assert lock.stat().st_ino == before


@pytest.mark.allow_processes
@pytest.mark.parametrize("run_in_progress", [1], indirect=True)
def test_clean_waits_for_the_run_and_keeps_the_lock_file_it_held(
        tmp_path: Path, run_in_progress: subprocess.Popen[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    lock = tmp_path / NODE_LOCK.lstrip("/")
    inode = lock.stat().st_ino
    assert main(["--root", str(tmp_path), "clean"]) == 0
    assert (f"machine-agent: waiting for another command changing this node to finish "
            f"(pid {run_in_progress.pid}: machine-agent run)") in capsys.readouterr().err
    assert not (tmp_path / JOURNAL.lstrip("/")).exists()
    assert lock.stat().st_ino == inode  # the file another waiter may be locking stays
    assert os.listdir(lock.parent) == ["node.lock"]


def a_node(root: Path) -> None:
    """State to clean: the journal, status, credentials, the sentinel, a machine id."""
    Journal.load(Host(root)).save()
    for path, text in (("var/lib/machine-agent/status.json", "{}"),
                       ("var/lib/machine-agent/credentials/token", "t"),
                       ("var/lib/machine-agent/ipam/static.json", "{}"),
                       ("run/cluster-api/bootstrap-success.complete", "success\n"),
                       ("etc/machine-id", "3d1219c7c4c5404aaa1f6d2a48adfda4\n")):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def clean_killed_after(root: Path, effects: int | None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "MACHINE_AGENT_CRASH_AFTER"}
    if effects is not None:
        env["MACHINE_AGENT_CRASH_AFTER"] = str(effects)
    return subprocess.run([sys.executable, "-m", "agent.cli", "--root", str(root), "clean",
                           "--machine-id"], env=env, capture_output=True, timeout=60,
                          check=False).returncode


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.mark.allow_processes
def test_clean_killed_after_any_side_effect_then_run_again_leaves_what_one_clean_does(
        tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    a_node(whole)
    assert clean_killed_after(whole, None) == 0
    wanted = files(whole)
    for n in range(1, 20):
        root = tmp_path / f"killed-{n}"
        a_node(root)
        if clean_killed_after(root, n) == 0:  # fewer side effects than n: done
            break
        assert clean_killed_after(root, None) == 0
        assert files(root) == wanted, f"killed after side effect {n}"
    else:
        pytest.fail("clean made more than 19 side effects")
    assert n > 3  # the kills fell inside clean's work, not before it
