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

from agent.sandbox.sandbox import Sandbox
from tests.e2e.crash_harness import Outcome, Slot, pool_problems

pytestmark = pytest.mark.allow_processes

SLOTS = 3
"""Nodes crashing in parallel: runs mostly wait (ARP probes, the clock, kubeadm), so three
fit two cores."""
_EFFECT = re.compile(r" effect (\d+): ")


def side_effects(lines: list[str]) -> int:
    return max((int(m.group(1)) for line in lines if (m := _EFFECT.search(line))), default=0)


def test_killed_after_every_side_effect_then_rerun_matches_an_uninterrupted_run(
        bring_up: Callable[[int], Sandbox]) -> None:
    started = time.monotonic()
    box = bring_up(SLOTS)
    slots = [Slot(box, node) for node in box.nodes]
    references: dict[int, Outcome] = {}
    total = 0
    for slot in slots:
        slot.reset()
        code, lines = slot.run()
        assert code == 0, "\n".join(lines)
        references[slot.node.index] = reference = slot.outcome(lines)
        assert reference.problems == []
        assert all(status == "True" for kind, (status, _) in reference.conditions.items()
                   if kind != "Ready"), reference.conditions
        assert reference.joins == 1 and reference.node_ready == "True"
        total = max(total, side_effects(lines))
    assert total > 40, f"only {total} side effects: the crash hook is not counting them"

    points: queue.SimpleQueue[int] = queue.SimpleQueue()
    for n in range(1, total + 1):
        points.put(n)
    failures: list[str] = []
    crashed: list[int] = []

    def work(slot: Slot) -> None:
        while True:
            try:
                n = points.get_nowait()
            except queue.Empty:
                return
            slot.reset()
            code, first = slot.run(crash_after=n)
            if code == -signal.SIGKILL:
                crashed.append(n)
            elif code != 0:  # fewer side effects this time (a shorter wait): it finished
                failures.append(f"n={n}: the run meant to crash exited {code}: "
                                + "\n".join(first[-20:]))
                continue
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
    print(f"crash harness: {total} side effects, {len(crashed)} crash points killed and "
          f"resumed on {len(slots)} nodes in {elapsed:.0f}s")
    assert failures == [], f"{len(failures)} crash points differ:\n" + "\n".join(failures)
    assert pool_problems(box) == []
    assert len(crashed) >= total - 5, f"only {len(crashed)} of {total} runs were killed"
