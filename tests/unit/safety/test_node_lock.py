"""The node-wide lock (issue 26 #1): one holder at a time, named to whoever finds it
taken; re-entrant within a process; released when its holder dies."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.host import Host, LockBusyError
from agent.state import NODE_LOCK, node_lock

HOLD = """
import sys, time
from agent.host import Host
from agent.state import node_lock
with node_lock(Host(sys.argv[1]), "run"):
    print("held", flush=True)
    time.sleep(30)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait(timeout=10)


@pytest.mark.allow_processes
def test_a_command_that_will_not_wait_is_refused_naming_the_holders_pid(
        tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    with pytest.raises(LockBusyError) as err, node_lock(Host(tmp_path), "reset", wait=False):
        pass
    assert f"pid {holder.pid}: machine-agent run" in str(err.value)
    assert err.value.temporary  # exit 3: running again may succeed


@pytest.mark.allow_processes
def test_a_waiting_command_says_whom_it_waits_for_and_goes_on_when_it_dies(
        tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    said: list[str] = []

    def on_wait(message: str) -> None:
        said.append(message)
        holder.kill()  # the holder dies: the kernel releases its lock

    started = time.monotonic()
    with node_lock(Host(tmp_path), "run", on_wait=on_wait):
        assert (tmp_path / NODE_LOCK.lstrip("/")).read_text().startswith("pid ")
    assert said == [f"waiting for another command changing this node to finish "
                    f"(pid {holder.pid}: machine-agent run)"]
    assert time.monotonic() - started < 10


def test_the_lock_is_reentrant_within_a_process_and_private(tmp_path: Path) -> None:
    host = Host(tmp_path)
    with node_lock(host, "daemon (reconfigure)"), node_lock(host, "daemon (bootstrap)",
                                                             wait=False):
        lock = tmp_path / NODE_LOCK.lstrip("/")
        assert "daemon (reconfigure)" in lock.read_text()
    assert lock.stat().st_mode & 0o777 == 0o600
    assert lock.parent.stat().st_mode & 0o777 == 0o700
    assert lock.read_text() == ""  # released: no holder named any more
