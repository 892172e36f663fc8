"""`machine-agent status` as the person on call and their scripts use it: the exit status
of cloud-init's (0 done, 1 failed, 2 done with recoverable problems), a kill switch that
ends `--wait` at once, `--long`, JSON/YAML in the Machine's camelCase, tables that stay
aligned, and no traceback when the reader of the output goes away."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from agent.config import load_config
from agent.errors import PermanentError, Reason
from agent.host import Clock, Host
from agent.orchestrator import Orchestrator
from agent.phases.base import Phase, PhaseContext, PhasePlan, PhaseResult
from agent.report import LocalStatus

REPO = Path(__file__).parents[3]


class SteppingClock(Clock):
    """Wall time that moves only when the agent sleeps: timings are exact."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> dt.datetime:
        return dt.datetime(2026, 12, 3, 9, 0, tzinfo=dt.UTC) + dt.timedelta(seconds=self.t)

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


@dataclass
class WaitsResult(PhaseResult):
    warning: str = ""


class Waits(Phase):
    """A phase that waits on something outside: a progress report, then time passes."""

    Result = WaitsResult

    def __init__(self, name: str, condition: str, success: Reason,
                 waits: list[tuple[str, float]], fail: str | None = None,
                 warning: str | None = None) -> None:
        self.name, self.condition, self.success = name, condition, success
        self.waits, self.fail, self.warning = waits, fail, warning

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        return PhasePlan(self.name)

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> WaitsResult:
        for message, seconds in self.waits:
            ctx.progress(message)
            ctx.host.clock.sleep(seconds)
        if self.fail:
            raise PermanentError(self.fail, reason=Reason.TimeNotSynchronized)
        return WaitsResult(warning=self.warning or "")

    def reason(self, result: WaitsResult) -> Reason:
        return Reason.TimeNotSynchronized if result.warning else self.success

    def message(self, result: WaitsResult) -> str:
        return result.warning or f"{self.name} done"

    def inputs(self, config: Any) -> Any:
        return self.name


def network(**kw: Any) -> Waits:
    return Waits("network", "NetworkReady", Reason.NetworkConfigured,
                 [("checking that gateway 192.0.2.1 answers on eth0", 2.0)], **kw)


def time_phase(**kw: Any) -> Waits:
    return Waits("time", "TimeSynchronized", Reason.TimeSynchronized,
                 [("waiting for the clock to synchronise (offset 80ms)", 1.0),
                  ("waiting for the clock to synchronise (offset 30ms)", 1.0),
                  ("waiting for the clock to synchronise (offset 2ms)", 1.5)], **kw)


def bootstrap(root: Path, phases: list[Phase], *, setup: float = 0.0) -> Host:
    """A run as the daemon makes it: the status goes not final, the session opens
    (`setup` seconds: cloud-init, the Machine), then the phases run."""
    host = Host(root)
    clock = SteppingClock()
    host.clock = clock
    orchestrator = Orchestrator(load_config(host, []), host, phases=phases,
                                reporters=[LocalStatus(host)])
    LocalStatus(host).publish(orchestrator.conditions.all(), final=False)
    clock.sleep(setup)
    orchestrator.run()
    return host


def status(root: Path, *args: str) -> int:
    return main(["--root", str(root), "status", *args])


def test_exit_status_says_done_failed_or_done_with_problems(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert status(tmp_path / "none") == 0  # nothing ran yet: cloud-init says 0 too
    assert "no run recorded on this boot yet" in capsys.readouterr().out

    bootstrap(tmp_path / "ok", [network(), time_phase()])
    assert status(tmp_path / "ok") == 0
    assert capsys.readouterr().out.startswith("status: bootstrapped\n")

    bootstrap(tmp_path / "failed", [network(), time_phase(fail="no server answered")])
    assert status(tmp_path / "failed") == 1
    assert capsys.readouterr().out.startswith("status: failed\n")

    bootstrap(tmp_path / "warned", [network(), time_phase(warning="clock off by 3s")])
    assert status(tmp_path / "warned") == 2
    out = capsys.readouterr().out
    assert out.startswith("status: bootstrapped, with recoverable problems")
    assert "TimeNotSynchronized" in out


def test_wait_stops_at_once_when_the_kill_switch_is_set(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "etc/machine-agent").mkdir(parents=True)
    (tmp_path / "etc/machine-agent/disabled").touch()
    assert status(tmp_path, "--wait", "--timeout", "1800") == 4
    assert "disabled (/etc/machine-agent/disabled exists): no run will come" in \
        capsys.readouterr().err

    (tmp_path / "etc/machine-agent/disabled").unlink()
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cmdline").write_text("root=/dev/vda machine-agent.disabled quiet\n")
    assert status(tmp_path, "--wait", "--format", "json") == 4
    doc = json.loads(capsys.readouterr().out)
    assert doc["outcome"] == "disabled"
    assert doc["disabled"] == "the kernel command line has machine-agent.disabled"


def test_a_kill_switch_set_after_this_boots_run_does_not_hide_its_outcome(
        tmp_path: Path) -> None:
    bootstrap(tmp_path, [network(), time_phase(fail="no server answered")])
    (tmp_path / "etc/machine-agent").mkdir(parents=True)
    (tmp_path / "etc/machine-agent/disabled").touch()
    assert status(tmp_path, "--wait") == 1


def test_wait_tells_a_failure_from_a_timeout(tmp_path: Path) -> None:
    bootstrap(tmp_path / "failed", [network(), time_phase(fail="no server answered")])
    assert status(tmp_path / "failed", "--wait", "--timeout", "0") == 1
    assert status(tmp_path / "nothing", "--wait", "--timeout", "0") == 124


def test_long_shows_each_phases_timing_attempts_reason_and_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap(tmp_path, [network(), time_phase(fail="no server answered")])
    assert status(tmp_path, "--long") == 1
    out = capsys.readouterr().out
    network_block = out[out.index("NetworkReady: True"):out.index("TimeSynchronized:")]
    assert "phase:    network, completed, 1 attempt" in network_block
    assert "(2s)" in network_block  # the gateway's 2 s
    time_block = out[out.index("TimeSynchronized: False"):]
    assert "(TimeNotSynchronized)" in time_block
    assert "phase:    time, failed, 1 attempt" in time_block
    assert "(3.5s)" in time_block
    assert "message:  no server answered" in time_block
    assert f"fix:      {Reason.TimeNotSynchronized.info.fix}" in time_block


def _keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [k for k, v in value.items() for k in [k, *(_keys(v) if k != "result" else [])]]
    if isinstance(value, list):
        return [k for v in value for k in _keys(v)]
    return []


def test_json_and_yaml_are_in_the_machines_camel_case(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap(tmp_path, [network(), time_phase()])
    assert status(tmp_path, "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert status(tmp_path, "--format", "yaml") == 0
    assert yaml.safe_load(capsys.readouterr().out) == doc
    assert doc["outcome"] == "bootstrapped"
    assert set(doc["conditions"][0]) == {"type", "status", "reason", "message",
                                         "lastTransitionTime"}
    assert doc["phases"]["time"]["startedAt"] == "2026-12-03T09:00:02Z"
    assert doc["phases"]["time"]["seconds"] == pytest.approx(3.0)  # the journal's seconds
    assert not [k for k in _keys(doc) if "_" in k]


def test_a_message_of_several_lines_keeps_the_table_aligned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failure = "kubeadm join failed:\n[preflight] Running pre-flight checks\nerror: boom"
    bootstrap(tmp_path, [network(), time_phase(fail=failure)])
    status(tmp_path)
    lines = capsys.readouterr().out.splitlines()
    header = next(x for x in lines if x.startswith("TYPE"))
    column = header.index("MESSAGE")
    first = next(i for i, x in enumerate(lines) if x.startswith("TimeSynchronized"))
    assert lines[first][column:] == "kubeadm join failed:"
    assert lines[first + 1] == " " * column + "[preflight] Running pre-flight checks"
    assert lines[first + 2].startswith(" " * column + "error: boom")
    assert lines[first + 3].startswith("NodeBootstrapped")  # the next row, in its place
    summary = lines[first + 3]
    assert summary[column:].startswith("TimeSynchronized: kubeadm join failed:")


@pytest.mark.allow_processes
@pytest.mark.parametrize(("command", "code"), [
    (["status", "--long"], 141), (["status", "--json"], 141), (["analyze"], 141),
    (["--help"], 0),  # argparse itself ignores the error, then exits 0
])
def test_a_closed_pipe_ends_quietly(tmp_path: Path, command: list[str], code: int) -> None:
    """`machine-agent status | head`: the reader is gone when the agent writes."""
    bootstrap(tmp_path, [network(), time_phase(fail="no server answered")])
    read_end, write_end = os.pipe()
    os.close(read_end)  # as `head` after its lines: every write now fails with EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "agent.cli", "--root", str(tmp_path),
                               *command], stdout=write_end, stderr=subprocess.PIPE,
                              cwd=REPO, timeout=60)
    finally:
        os.close(write_end)
    assert proc.stderr.decode() == ""
    assert proc.returncode == code
