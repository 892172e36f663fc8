"""Two commands that change the node started together (issue 26 #1): without the node
lock the second kubeadm's preflight fails on the first one's files and its `kubeadm reset`
deletes them, breaking the node for good. With it, the second waits, then finds every
phase up to date: one join, a healthy node."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable

import pytest
from machine_agent_sandbox.sandbox import Sandbox

from tests.e2e.conftest import assert_bootstrapped

pytestmark = pytest.mark.allow_processes

RUN_TIMEOUT = 240.0


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    return proc.returncode, out


@pytest.mark.parametrize("apart", [0.0, 1.0])
def test_two_runs_started_together_join_once_and_leave_a_healthy_node(
        apart: float, bring_up: Callable[[int], Sandbox]) -> None:
    box = bring_up(1)
    (node,) = box.nodes
    first = node.start("run")
    time.sleep(apart)
    second = node.start("run")
    (code1, out1), (code2, out2) = _finish(first), _finish(second)
    assert (code1, code2) == (0, 0), out1 + "\n----\n" + out2
    assert "waiting for another command changing this node to finish (pid " in out1 + out2
    assert_bootstrapped(box, node)
    assert json.loads(node.world.read_text()).get("joins", []).count(node.name) == 1
    # and a third run afterwards finds nothing to do
    code, lines = node.run("run")
    assert code == 0, "\n".join(lines)
    assert "nothing to do: every phase is up to date" in lines


def test_a_run_that_will_not_wait_names_the_holder(bring_up: Callable[[int], Sandbox]
                                                   ) -> None:
    box = bring_up(1)
    (node,) = box.nodes
    box.stop_ntp()  # the first run waits at the time gate, holding the lock
    first = node.start("run")
    try:
        deadline = time.monotonic() + 30
        lock = node.root / "var/lib/machine-agent/node.lock"
        while not (lock.exists() and lock.read_text().strip()):
            assert first.poll() is None and time.monotonic() < deadline, "never locked"
            time.sleep(0.05)
        code, lines = node.run("run", "--no-wait")
        assert code == 3, "\n".join(lines)
        message = "\n".join(lines)
        assert f"another command is changing this node (pid {first.pid}: machine-agent " \
            "run" in message
        # read-only commands never wait for it
        for args in (("status",), ("plan",), ("config", "show")):
            started = time.monotonic()
            code, lines = node.run(*args)
            assert code == 0, (args, lines)
            assert time.monotonic() - started < 20, args
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
