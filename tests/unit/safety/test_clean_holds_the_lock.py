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
