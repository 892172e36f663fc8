"""The suite's stray-process guard (issue 26 #13) sees a process a test left behind even
when its parent is gone and init adopted it (the faketime wrapper terminated, its chronyd
left running), by the environment marker every process the run starts inherits."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.conftest import _ours, _pids


@pytest.mark.allow_processes
def test_an_orphan_the_test_started_is_recognised_as_ours() -> None:
    before = _pids()
    # sh starts a sleep in the background and exits at once: the sleep is orphaned
    wrapper = subprocess.run(["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True, timeout=10)
    orphan = int(wrapper.stdout.strip())
    try:
        assert orphan in _pids() - before
        with open(f"/proc/{orphan}/stat") as handle:
            ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        assert ppid != os.getpid()  # adopted by init (or a subreaper), not our child
        assert _ours(orphan) == "sleep 30"
        assert _ours(os.getppid()) is None  # what the run did not start is not ours
    finally:
        os.kill(orphan, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while _ours(orphan) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _ours(orphan) is None
