"""Killed at any instant (issue 26, "Kill at any instant"): besides the instrumented crash
points (test_crash_every_step.py kills right after each side effect the agent counts),
the agent is SIGKILLed at random wall-clock instants of a sandbox bootstrap, in two ways:
the agent alone (its children, kubeadm included, run on and end by themselves), and the
agent with every process it started (a power cut). Then it runs again to the end, and the
node, the Machine, its Events, the IPAM claims and the workload cluster must be exactly as
an uninterrupted run leaves them (tests/e2e/crash_harness.py: links, addresses, routes,
files with their modes, one claim, one join, conditions, Events, no stray processes,
namespaces or temp files).

Bounded for CI: KILL_BUDGET seconds of kills (MACHINE_AGENT_KILL_BUDGET overrides), on
SLOTS nodes of one sandbox in parallel; the instants are drawn from a seeded generator
(MACHINE_AGENT_KILL_SEED), printed, so a failure can be replayed."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from machine_agent_sandbox.sandbox import Sandbox

from tests.e2e.crash_harness import Outcome, Slot, pool_problems

pytestmark = pytest.mark.allow_processes

SLOTS = 2
KILL_BUDGET = float(os.environ.get("MACHINE_AGENT_KILL_BUDGET", "150"))
MIN_KILLS = 8
"""Kills made even when the budget runs out first (a slow machine): both modes, several
instants each."""
ORPHANS_WAIT = 60.0
"""How long the children of an agent killed alone may take to end by themselves."""


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, children first found (a new session does not hide one:
    parentage still shows it while the agent lives)."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def kill_at(slot: Slot, delay: float, mode: str) -> tuple[int, list[str]]:
    """Start `run`, SIGKILL it `delay` seconds in (`agent`: the agent alone, then wait for
    its children to end; `tree`: the agent and everything it started, at once); the exit
    status (0 when it finished first) and its output."""
    agent = slot.node.start("--log-level", "debug", "run")
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline and agent.poll() is None:
        time.sleep(0.01)
    if agent.poll() is None:
        children = descendants(agent.pid)
        victims = [agent.pid, *children] if mode == "tree" else [agent.pid]
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if mode == "agent":
            end = time.monotonic() + ORPHANS_WAIT
            while any(alive(p) for p in children):
                assert time.monotonic() < end, f"children of the killed agent still run: " \
                                               f"{[p for p in children if alive(p)]}"
                time.sleep(0.05)
    out, _ = agent.communicate(timeout=30)
    return agent.returncode, out.splitlines()


def test_killed_at_random_instants_then_rerun_matches_an_uninterrupted_run(
        bring_up: Callable[[int], Sandbox]) -> None:
    seed = int(os.environ.get("MACHINE_AGENT_KILL_SEED", str(time.time_ns() % 10**6)))
    rng = random.Random(seed)
    box = bring_up(SLOTS)
    slots = [Slot(box, node) for node in box.nodes]
    references: dict[int, Outcome] = {}
    durations: list[float] = []
    for slot in slots:
        slot.reset()
        started = time.monotonic()
        code, lines = slot.run()
        durations.append(time.monotonic() - started)
        assert code == 0, "\n".join(lines)
        references[slot.node.index] = reference = slot.outcome(lines)
        assert reference.problems == [] and reference.joins == 1
    span = max(durations)
    budget_end = time.monotonic() + KILL_BUDGET
    kills: list[tuple[str, float, int]] = []
    failures: list[str] = []

    def work(slot: Slot, modes: list[str], instants: list[float]) -> None:
        for n, (mode, delay) in enumerate(zip(modes, instants, strict=True)):
            if n >= MIN_KILLS // SLOTS and time.monotonic() > budget_end:
                return
            slot.reset()
            code, first = kill_at(slot, delay, mode)
            kills.append((mode, round(delay, 2), code))
            if code not in (0, -signal.SIGKILL):
                failures.append(f"{mode} at {delay:.2f}s: the killed run exited {code}: "
                                + "\n".join(first[-20:]))
                continue
            code, second = slot.run()
            if code != 0:
                failures.append(f"{mode} at {delay:.2f}s: the run after the kill exited "
                                f"{code}:\n" + "\n".join([*first[-30:], "----", *second]))
                continue
            differences = slot.outcome(first, second).differences(
                references[slot.node.index])
            if differences:
                failures.append(f"{mode} at {delay:.2f}s:\n  " + "\n  ".join(differences)
                                + "\n" + "\n".join([*first[-30:], "----", *second[-30:]]))

    plans = []
    for index, slot in enumerate(slots):
        count = 200  # bounded: the budget ends it long before
        modes = [("agent", "tree")[(i + index) % 2] for i in range(count)]
        instants = [rng.uniform(0.05, span) for _ in range(count)]
        plans.append((slot, modes, instants))
    with concurrent.futures.ThreadPoolExecutor(len(slots)) as pool:
        for future in [pool.submit(work, *plan) for plan in plans]:
            future.result()
    print(f"kill harness (seed {seed}): {len(kills)} kills over a {span:.1f}s bootstrap: "
          f"{sorted(kills)}")
    assert failures == [], (f"seed {seed}: {len(failures)} of {len(kills)} kills differ:\n"
                            + "\n".join(failures))
    assert len(kills) >= MIN_KILLS
    assert {mode for mode, _, code in kills if code == -signal.SIGKILL} == {"agent", "tree"}
    assert pool_problems(box) == []
