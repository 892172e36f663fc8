"""The agent killed with SIGKILL in the middle of a phase and started again: it resumes,
applies nothing twice, claims no address twice, and the node ends bootstrapped."""

from __future__ import annotations

import collections
import json
import os
import signal
import time
from collections.abc import Callable

import pytest
from machine_agent_sandbox.sandbox import Sandbox
from machine_agent_sandbox.testkit.sandboxproxy import through_proxy

from tests.e2e.conftest import assert_bootstrapped, data_addresses, effects

pytestmark = pytest.mark.allow_processes


@pytest.mark.parametrize("crash_after", [3, 6, 9, 12, 16])
def test_killed_after_a_side_effect_resumes_without_repeating_it(
        crash_after: int, bring_up: Callable[[int], Sandbox]) -> None:
    box = bring_up(1)
    (node,) = box.nodes
    with through_proxy(box, node) as proxy:  # counts what the node sends
        code, first = node.run("--log-level", "debug", "run",
                               env={"MACHINE_AGENT_CRASH_AFTER": str(crash_after)})
        assert code == -signal.SIGKILL, "\n".join(first)
        code, second = node.run("--log-level", "debug", "run")
        assert code == 0, "\n".join(second)
    # The CNI proof runs each plugin for ADD, CHECK and DEL in a throwaway namespace: a
    # verification that repeats by design, not a change to the node. The Machine's status
    # is applied again with each report (server-side apply: the same content changes
    # nothing).
    done = [e for e in effects(first) + effects(second)
            if "/opt/cni/bin/" not in e and not e.startswith("apply Machine ")]
    repeated = [e for e, n in collections.Counter(done).items() if n > 1]
    assert repeated == [], f"applied twice: {repeated}"
    assert_bootstrapped(box, node)
    assert data_addresses(box, node) == ["192.0.2.10/24"]
    # One claim at most: a resumed run whose create is answered AlreadyExists reads the
    # claim the killed run made, it never makes a second one.
    claims = box.admin.claims()
    assert len(claims) <= 1
    created = proxy.counters().get(("create", "ipaddressclaims"), 0)
    assert 1 <= created <= 2, created  # at most one create per run


def test_killed_while_waiting_for_the_clock_resumes(bring_up: Callable[[int], Sandbox]
                                                    ) -> None:
    box = bring_up(1)
    (node,) = box.nodes
    box.stop_ntp()  # hold the time gate closed, so the kill lands inside the phase
    agent = node.start("run")
    status = node.root / "var/lib/machine-agent/status.json"
    deadline = time.monotonic() + 30
    while not _waiting_for_time(status):
        assert agent.poll() is None and time.monotonic() < deadline, "never saw the wait"
        time.sleep(0.05)
    os.killpg(agent.pid, signal.SIGKILL)
    agent.wait(timeout=10)
    assert node.status()["phases"]["time"]["state"] == "started"  # cut off mid-phase
    box.ntp = box.registry.spawn(box.ntp.args, box.registry.base / "ntp/chronyd.log")
    code, lines = node.run("run")
    assert code == 0, "\n".join(lines)
    assert "network  up to date, nothing to apply" in lines
    assert_bootstrapped(box, node)


def _waiting_for_time(status: object) -> bool:
    from pathlib import Path

    assert isinstance(status, Path)
    try:
        doc = json.loads(status.read_text())
    except (FileNotFoundError, ValueError):
        return False
    return any(c["type"] == "TimeSynchronized" and c["reason"] == "TimeSynchronizing"
               for c in doc["conditions"])
