"""`machine-agent status --wait`: follows a run to its outcome, like `cloud-init status
--wait`, with a bounded time-out and an exit status scripts can use."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.console.status import read_view, render
from agent.console.wait import wait_for_outcome
from agent.host import Clock, Host
from agent.report import SUMMARY, Conditions, LocalStatus

TYPES = ["NetworkReady", "TimeSynchronized"]


class ScriptedClock(Clock):
    """Each sleep is a poll interval in which the agent (the script) moves on."""

    def __init__(self, steps: list[Callable[[], None]]) -> None:
        self.steps = steps
        self.t = 0.0

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        if self.steps:
            self.steps.pop(0)()


def agent_run(host: Host, outcome: str) -> list[Callable[[], None]]:
    """The status file as a run writes it: network runs, completes, time runs, ends."""
    conditions = Conditions(host, TYPES)
    status = LocalStatus(host)

    def step(kind: str, state: str, reason: str, message: str,
             final: bool = False) -> Callable[[], None]:
        def write() -> None:
            conditions.set(kind, state, reason, message)  # type: ignore[arg-type]
            status.publish(conditions.all(), final)
        return write

    last = (step("TimeSynchronized", "True", "TimeSynchronized", "offset 1ms")
            if outcome == "ok" else
            step("TimeSynchronized", "False", "TimeNotSynchronized", "no server answered"))
    summary = (step(SUMMARY, "True", "Bootstrapped", "all phases completed", final=True)
               if outcome == "ok" else
               step(SUMMARY, "False", "TimeNotSynchronized", "TimeSynchronized: no server",
                    final=True))
    return [
        step("NetworkReady", "Unknown", "InProgress", "running"),
        lambda: None,  # a poll that sees nothing new
        step("NetworkReady", "True", "NetworkConfigured", "eth0 192.0.2.10/24"),
        step("TimeSynchronized", "Unknown", "InProgress", "waiting for chronyd"),
        last, summary,
    ]


def test_follows_each_phase_change_and_exits_0_when_bootstrapped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = Host(tmp_path)
    host.clock = ScriptedClock(agent_run(host, "ok"))
    assert wait_for_outcome(host, timeout=60) == 0
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        "waiting for the agent to start a run",
        "NetworkReady Unknown InProgress running",
        "TimeSynchronized Unknown Pending not started",
        "NetworkReady True NetworkConfigured eth0 192.0.2.10/24",
        "TimeSynchronized Unknown InProgress waiting for chronyd",
        "TimeSynchronized True TimeSynchronized offset 1ms",
        "NodeBootstrapped True Bootstrapped all phases completed",
    ]


def test_a_failed_run_exits_1_with_the_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = Host(tmp_path)
    host.clock = ScriptedClock(agent_run(host, "failed"))
    assert wait_for_outcome(host, timeout=60) == 1
    out = capsys.readouterr().out
    assert "TimeSynchronized   False    TimeNotSynchronized  no server answered" in out
    assert out.splitlines()[-1].startswith("NodeBootstrapped   False    TimeNotSynchronized")


def test_json_prints_only_the_final_document(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = Host(tmp_path)
    host.clock = ScriptedClock(agent_run(host, "ok"))
    assert wait_for_outcome(host, fmt="json", timeout=60) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["final"] is True and doc["outcome"] == "bootstrapped"
    assert {c["type"]: c["status"] for c in doc["conditions"]} == {
        "NetworkReady": "True", "TimeSynchronized": "True", SUMMARY: "True"}


def test_gives_up_after_the_timeout_and_says_the_run_goes_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = Host(tmp_path)
    clock = ScriptedClock(agent_run(host, "ok")[:2])  # the run never finishes
    host.clock = clock
    assert wait_for_outcome(host, timeout=5) == 124  # not 1: nothing failed
    assert clock.t == pytest.approx(5.0)
    captured = capsys.readouterr()
    assert "NetworkReady       Unknown  InProgress" in captured.out
    assert "no outcome within 5s" in captured.err


def test_a_finished_run_is_reported_at_once(tmp_path: Path) -> None:
    host = Host(tmp_path)
    for step in agent_run(host, "ok"):
        step()
    clock = ScriptedClock([])
    host.clock = clock
    assert wait_for_outcome(host, timeout=60) == 0
    assert clock.t == 0


def test_the_command_line_wires_wait_and_timeout(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agent.cli import main

    assert main(["--root", str(tmp_path), "status", "--wait", "--timeout", "0"]) == 124
    assert "no outcome within 0s" in capsys.readouterr().err


def test_json_says_timeout_when_the_outcome_did_not_come(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = Host(tmp_path)
    host.clock = ScriptedClock(agent_run(host, "ok")[:2])  # the run never finishes
    assert wait_for_outcome(host, fmt="json", timeout=5) == 124
    doc = json.loads(capsys.readouterr().out)
    assert (doc["outcome"], doc["final"]) == ("timeout", False)
    assert {c["type"]: c["status"] for c in doc["conditions"]}["NetworkReady"] == "Unknown"


def booted(root: Path, boot_id: str) -> None:
    """The kernel's id of the boot the machine is in (agent.report.BOOT_ID)."""
    path = root / "proc/sys/kernel/random/boot_id"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{boot_id}\n")


def test_an_outcome_from_a_previous_boot_is_not_this_boots(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = Host(tmp_path)
    booted(tmp_path, "0b7c1e0a-boot-1")
    for step in agent_run(host, "failed"):  # the boot before ended failed ...
        step()
    booted(tmp_path, "5d2f9c3e-boot-2")  # ... and the machine rebooted
    view = read_view(host)
    assert (view.outcome, view.exit_code) == ("not-started", 0)
    assert "(the conditions below are from a previous boot)" in render(view, "text")

    # This boot's run starts a few polls later; --wait waits for its outcome.
    clock = ScriptedClock([lambda: None, lambda: None, *agent_run(host, "ok")])
    host.clock = clock
    assert wait_for_outcome(host, timeout=60) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "waiting for the agent to start a run"
    assert "TimeNotSynchronized" not in out
    assert " ".join(out.splitlines()[-1].split()) == \
        "NodeBootstrapped True Bootstrapped all phases completed"
    assert clock.t > 0
