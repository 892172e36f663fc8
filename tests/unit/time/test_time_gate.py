"""chronyc's answers parsed, and the time gate: opens on a synchronised clock, waits
(bounded) showing the offset, holds the join on time-out, or warns when told to."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agent.config import load_config
from agent.config.sources import FileSource
from agent.config.timesync import ChronySettings
from agent.errors import AgentError, Reason, TemporaryError
from agent.host import Clock, CommandResult, Host
from agent.orchestrator import Orchestrator
from agent.phases.base import Phase, PhaseContext
from agent.phases.time import TimePhase
from agent.phases.time.chronyc import chronyc_argv, parse_sources, parse_tracking
from agent.phases.time.gate import ClockState, wait_until_synchronised
from agent.report import Condition
from agent.state import Journal

# Captured from chronyd 4.3 here (`chronyc -n -c tracking` / `sources`).
SYNCED = ("7F000001,127.0.0.1,9,1796230127.172330389,-0.000000717,-0.000000240,0.000000414,"
          "-0.376,-0.016,5.947,0.000004551,0.000003840,0.5,Normal\n")
UNSYNCED = ("00000000,,0,0.000000000,-0.000000035,0.000000000,0.000000000,0.035,0.000,0.000,"
            "1.000000000,1.000000000,0.0,Not synchronised\n")
SLOW_2S = SYNCED.replace("-0.000000717", "2.000000000")
SOURCES = ("^,*,127.0.0.1,8,-1,77,0,-0.000000061,-0.000000301,0.000002311\n"
           "^,?,192.0.2.123,0,0,0,4294967295,0.000000000,0.000000000,0.000000000\n")


def test_tracking_is_parsed_with_the_offset_sign_of_the_clock() -> None:
    synced = parse_tracking(SYNCED)
    assert (synced.reference, synced.stratum, synced.leap) == ("127.0.0.1", 9, "Normal")
    assert synced.synchronised
    # chronyc prints "0.000000717 seconds fast of NTP time" for this row
    assert synced.offset == pytest.approx(0.000000717)
    assert parse_tracking(SLOW_2S).offset == pytest.approx(-2.0)
    unsynced = parse_tracking(UNSYNCED)
    assert not unsynced.synchronised and unsynced.reference == ""


def test_sources_are_parsed_with_reach_in_octal() -> None:
    selected, dead = parse_sources(SOURCES)
    assert (selected.name, selected.state, selected.reach) == ("127.0.0.1", "*", 0o77)
    assert (dead.name, dead.state, dead.reach) == ("192.0.2.123", "?", 0)


@pytest.mark.parametrize("text", ["", "506 Cannot talk to daemon\n", "a,b,c\n",
                                  SYNCED.replace(",9,", ",nine,")])
def test_garbled_chronyc_output_is_an_error_that_quotes_it(text: str) -> None:
    with pytest.raises(AgentError, match="cannot parse `chronyc -c tracking` output"):
        parse_tracking(text)


def test_chronyc_is_pointed_at_the_configured_socket() -> None:
    assert chronyc_argv(ChronySettings(), "tracking") == ["chronyc", "-n", "-c", "tracking"]
    private = ChronySettings(command_address="/tmp/t/chronyd.sock", command_port=11323)
    assert chronyc_argv(private, "tracking") == [
        "chronyc", "-n", "-c", "-h", "/tmp/t/chronyd.sock", "-p", "11323", "tracking"]


class FakeClock(Clock):
    def __init__(self) -> None:
        self.now_s = 1000.0

    def monotonic(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now_s += seconds


def test_gate_waits_showing_the_offset_and_opens_when_synchronised() -> None:
    states = iter([ClockState(False, -0.000000035, status="Not synchronised"),
                   ClockState(True, 2.5, "127.0.0.1", 9, "Normal"),  # synced but far off
                   ClockState(True, 0.004, "127.0.0.1", 9, "Normal")])
    shown: list[tuple[str, Reason]] = []
    outcome = wait_until_synchronised(lambda: next(states), max_offset=0.1, timeout=30,
                                      interval=1, clock=FakeClock(),
                                      progress=lambda m, r=Reason.InProgress: shown.append((m, r)))
    assert outcome.opened and outcome.waited == 2
    assert [r for _, r in shown] == [Reason.TimeSynchronizing] * 2
    assert "offset -35ns, status Not synchronised, source none" in shown[0][0]
    assert "offset +2.5s, status Normal, source 127.0.0.1" in shown[1][0]


def test_gate_gives_up_at_the_time_out_with_what_it_last_saw() -> None:
    clock = FakeClock()
    reads = 0

    def read() -> ClockState:
        nonlocal reads
        reads += 1
        if reads > 3:
            raise TemporaryError("chronyd did not answer", reason=Reason.TimeNotSynchronized)
        return ClockState(False, None, status="Not synchronised")

    outcome = wait_until_synchronised(read, max_offset=0.1, timeout=10, interval=3,
                                      clock=clock, progress=lambda m, r=Reason.InProgress: None)
    assert not outcome.opened
    assert outcome.waited == 10 and clock.now_s == 1010  # the last sleep was cut short
    assert outcome.error == "chronyd did not answer"
    assert reads == 5  # at 0, 3, 6, 9 and 10 seconds


# -- the phase, with chronyc answered by a fake and the real orchestrator -------------------

class ChronycHost(Host):
    """A Host whose chronyc answers from a script; every other command is recorded."""

    def __init__(self, root: Path, tracking: list[str]) -> None:
        super().__init__(root, clock=FakeClock())
        self.tracking = tracking
        self.commands: list[list[str]] = []

    def read_only_view(self) -> Host:
        return self

    def run(self, argv: Sequence[str], **kwargs: Any) -> CommandResult:
        argv = list(argv)
        if argv[0] == "chronyc" and argv[-1] == "tracking":
            answer = self.tracking.pop(0) if len(self.tracking) > 1 else self.tracking[0]
            return CommandResult(tuple(argv), 0, answer, "", 0.01)
        if argv[0] == "chronyc" and argv[-1] == "sources":
            return CommandResult(tuple(argv), 0, SOURCES, "", 0.01)
        self.commands.append(argv)
        return CommandResult(tuple(argv), 0, "", "", 0.01)


def write_config(tmp_path: Path, time: str) -> str:
    path = tmp_path / "agent.yaml"
    path.write_text("apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\nspec:\n"
                    "  retry: {attempts: 1}\n  time:\n" + time)
    return str(path)


# Port 9 (discard) on loopback: nothing answers NTP there, so ntplib reports it unreachable.
DEAD_SERVER = "    servers: [{host: 127.0.0.1, port: 9}]\n    syncTimeout: 500ms\n"


class Recorder:
    def __init__(self) -> None:
        self.seen: list[Condition] = []

    def publish(self, conditions: list[Condition], final: bool) -> None:
        self.seen += [c for c in conditions if c.type == "TimeSynchronized"]


class JoinStandIn(Phase):
    """Stands in for the join phase, whatever it grows into: only its place matters."""

    name = "join"
    condition = "NodeJoined"
    success = Reason.Joined


def run_time_and_join(tmp_path: Path, host: ChronycHost, time: str) -> tuple[Any, Recorder]:
    loaded = load_config(host, [FileSource(write_config(tmp_path, time), required=True,
                                           outside_root=True)])
    recorder = Recorder()
    result = Orchestrator(loaded, host, phases=[TimePhase(), JoinStandIn()],
                          reporters=[recorder]).run()
    return result, recorder


def test_time_phase_writes_chrony_conf_restarts_chrony_and_opens(tmp_path: Path) -> None:
    host = ChronycHost(tmp_path / "root", [UNSYNCED, SYNCED])
    result, recorder = run_time_and_join(tmp_path, host, DEAD_SERVER)
    assert [o.outcome for o in result.outcomes] == ["applied", "applied"]
    conf = (tmp_path / "root/etc/chrony/chrony.conf").read_text()
    assert "server 127.0.0.1 port 9 iburst\n" in conf
    assert host.commands == [["systemctl", "restart", "chrony"]]
    waiting = [c for c in recorder.seen if c.reason == "TimeSynchronizing"]
    assert waiting and "offset +35ns" in waiting[0].message
    final = recorder.seen[-1]
    assert (final.status, final.reason) == ("True", "TimeSynchronized")
    assert final.message.startswith("clock synchronised to 127.0.0.1 (stratum 9), offset "
                                    "+717ns within 100ms; unreachable: 127.0.0.1:9 (")
    result_doc = Journal.load(host).phases["time"].result
    assert result_doc["servers"][0]["reachable"] is False
    assert result_doc["stratum"] == 9
    assert result_doc["chronySources"][0] == {"name": "127.0.0.1", "state": "*", "reach": "77"}


def test_time_out_fails_the_phase_and_keeps_join_pending(tmp_path: Path) -> None:
    host = ChronycHost(tmp_path / "root", [UNSYNCED])
    result, recorder = run_time_and_join(tmp_path, host, DEAD_SERVER)
    assert [o.outcome for o in result.outcomes] == ["failed", "pending"]
    assert result.exit_code == 3  # temporary: servers may come back
    failed = result.outcomes[0]
    assert failed.reason == "TimeNotSynchronized"
    assert "clock not synchronised within 500ms" in failed.message
    assert "servers tried: 127.0.0.1:9 unreachable (" in failed.message
    assert "; chronyd's sources: 127.0.0.1 reach 77, 192.0.2.123 never reached" \
        in failed.message
    assert "waiting for the time phase (TimeNotSynchronized)" in result.outcomes[1].message
    assert host.clock.monotonic() == 1000.5  # bounded by syncTimeout, on the fake clock
    assert [c.reason for c in recorder.seen][-2:] == ["TimeSynchronizing", "TimeNotSynchronized"]
    assert recorder.seen[-1].status == "False"


def test_time_out_with_on_timeout_warn_lets_join_run_with_a_warning(tmp_path: Path) -> None:
    host = ChronycHost(tmp_path / "root", [SLOW_2S])
    result, recorder = run_time_and_join(tmp_path, host, DEAD_SERVER + "    onTimeout: warn\n")
    assert [o.outcome for o in result.outcomes] == ["applied", "applied"]
    final = recorder.seen[-1]
    assert (final.status, final.reason) == ("True", "TimeNotSynchronized")
    assert "offset -2s" in final.message
    assert final.message.endswith("join goes on because spec.time.onTimeout is warn")


def test_unchanged_configuration_is_not_rewritten_and_chrony_not_restarted(
        tmp_path: Path) -> None:
    host = ChronycHost(tmp_path / "root", [SYNCED])
    run_time_and_join(tmp_path, host, DEAD_SERVER)
    journal = Journal.load(host)
    journal.phases.pop("time")  # forget the run: the phase plans against the host alone
    journal.save()
    plans = Orchestrator(load_config(host, [FileSource(str(tmp_path / "agent.yaml"),
                                                       outside_root=True)]),
                         host, phases=[TimePhase()]).plan()
    assert plans[0].changes == []


def test_reload_still_happens_after_a_crash_between_write_and_reload(tmp_path: Path) -> None:
    host = ChronycHost(tmp_path / "root", [SYNCED])
    loaded = load_config(host, [FileSource(write_config(tmp_path, DEAD_SERVER),
                                           outside_root=True)])
    phase = TimePhase()

    def context() -> PhaseContext:
        return PhaseContext(loaded.config, host, Journal.load(host), {},
                            lambda m, r=Reason.InProgress: None, logging.getLogger("test"))

    context().journal.start("time", "digest-of-inputs")
    plan = phase.plan(context())
    assert [c.key for c in plan.changes] == ["write:/etc/chrony/chrony.conf", "reload"]
    write = plan.changes[0]
    write.action(host)  # the file was written ...
    context().journal.step_done("time", write.key)  # ... and journaled; the process died
    replanned = phase.plan(context())
    assert [c.key for c in replanned.changes] == ["reload"]


def test_no_servers_leaves_time_alone_and_says_so(tmp_path: Path) -> None:
    host = ChronycHost(tmp_path / "root", [UNSYNCED])
    loaded = load_config(host, [])
    result = Orchestrator(loaded, host, phases=[TimePhase()]).run()
    assert result.ok and host.commands == []
    assert not (tmp_path / "root/etc/chrony").exists()
    assert "join is not gated" in result.outcomes[0].message
