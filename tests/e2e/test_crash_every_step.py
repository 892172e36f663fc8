"""Crash anywhere: a full sandbox bootstrap killed with SIGKILL right after its nth side
effect, for EVERY n from 1 to the number of side effects of an uninterrupted run, then
run again to the end. After each pair the node, the Machine, its Events, the IPAM claims
and the workload cluster must be exactly as an uninterrupted run leaves them (see
tests/e2e/crash_harness.py for what is compared and what is bookkeeping).

To fit CI, one sandbox (stand-in, router, NTP server, endpoints) serves every run; only the
node is reset between runs (fresh namespace and root, a fresh Machine with its Secret,
RBAC and token), and SLOTS nodes of the sandbox take the crash points in parallel, each
compared with its own uninterrupted reference run.
"""

from __future__ import annotations

import concurrent.futures
import queue
import re
import signal
import time
from collections.abc import Callable

import pytest
from machine_agent_sandbox.sandbox import Sandbox

from tests.e2e.crash_harness import Outcome, Slot, pool_problems

pytestmark = pytest.mark.allow_processes

SLOTS = 3
"""Nodes crashing in parallel: runs mostly wait (ARP probes, the clock, kubeadm), so three
fit two cores."""
_EFFECT = re.compile(r" effect (\d+): (.*)")
REMOTE_WRITES = ("create IPAddressClaim ", "apply Machine ", "create Event ")
"""Side effects on the management cluster (counted right after the write succeeded): a
kill there leaves a claim, a status or an Event the journal does not know of yet."""


def side_effects(lines: list[str]) -> int:
    return max((int(m.group(1)) for line in lines if (m := _EFFECT.search(line))), default=0)


def last_effect(lines: list[str]) -> str:
    return next((m.group(2) for line in reversed(lines) if (m := _EFFECT.search(line))), "")


def test_killed_after_every_side_effect_then_rerun_matches_an_uninterrupted_run(
        bring_up: Callable[[int], Sandbox]) -> None:
    started = time.monotonic()
    box = bring_up(SLOTS)
    slots = [Slot(box, node) for node in box.nodes]
    references: dict[int, Outcome] = {}
    side_effects_of: dict[int, int] = {}
    for slot in slots:
        slot.reset()
        code, lines = slot.run()
        assert code == 0, "\n".join(lines)
        references[slot.node.index] = reference = slot.outcome(lines)
        assert reference.problems == []
        assert all(status == "True" for kind, (status, _) in reference.conditions.items()
                   if kind != "Ready"), reference.conditions
        assert reference.joins == 1 and reference.node_ready == "True"
        side_effects_of[slot.node.index] = side_effects(lines)
    total = max(side_effects_of.values())
    assert total > 40, f"only {total} side effects: the crash hook is not counting them"

    points: queue.SimpleQueue[int] = queue.SimpleQueue()
    for n in range(1, total + 1):
        points.put(n)
    failures: list[str] = []
    crashed: dict[int, str] = {}
    """Crash point → the side effect the run was killed right after."""

    def work(slot: Slot) -> None:
        while True:
            try:
                n = points.get_nowait()
            except queue.Empty:
                return
            slot.reset()
            code, first = slot.run(crash_after=n)
            if code == -signal.SIGKILL:
                crashed[n] = last_effect(first)
            elif code != 0:
                failures.append(f"n={n}: the run meant to crash exited {code}: "
                                + "\n".join(first[-20:]))
                continue
            elif side_effects(first) >= n:
                failures.append(f"n={n}: the run made {side_effects(first)} side effects "
                                "and was not killed: the crash hook did not fire")
                continue
            # else: this run made fewer than n side effects, so point n did not exist in
            # it. The count varies by a few between runs: how many status applies the
            # reporter makes depends on how the conditions of the phases fall into its
            # 5 s delivery window, and the waits (the clock, the Node) poll.
            code, second = slot.run()
            if code != 0:
                failures.append(f"n={n}: the run after the crash exited {code}: "
                                + "\n".join(first + second))
                continue
            differences = slot.outcome(first, second).differences(references[slot.node.index])
            if differences:
                last = [line for line in first if _EFFECT.search(line)][-1:]
                failures.append(f"n={n} (killed after {last}):\n  " + "\n  ".join(differences)
                                + "\n" + "\n".join(first + second))

    with concurrent.futures.ThreadPoolExecutor(len(slots)) as pool:
        for future in [pool.submit(work, slot) for slot in slots]:
            future.result()
    elapsed = time.monotonic() - started
    print(f"crash harness: {sorted(side_effects_of.values())} side effects, {len(crashed)} "
          f"crash points killed and resumed on {len(slots)} nodes in {elapsed:.0f}s")
    assert failures == [], f"{len(failures)} crash points differ:\n" + "\n".join(failures)
    assert pool_problems(box) == []
    killed_after = {kind for kind in REMOTE_WRITES for what in crashed.values()
                    if what.startswith(kind)}
    assert killed_after == set(REMOTE_WRITES), sorted(crashed.items())
