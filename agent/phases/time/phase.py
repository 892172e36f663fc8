"""The time phase: configure the time daemon from `spec.time`, then hold the join until the
clock is synchronised.

plan: render the daemon's file (chrony.conf, a sources.d drop-in, or a timesyncd drop-in)
and, when it changed, reload the daemon. verify: ask every server with ntplib (named in the
condition when unreachable), then wait, bounded, until the daemon reports a synchronised
clock within `maxOffset`. A failure here leaves join Pending: the orchestrator runs no
later phase after a failed one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from agent.config.timesync import TimeSpec
from agent.errors import AgentError, Reason, TemporaryError
from agent.host import Host
from agent.phases.base import Change, PhaseContext, PhaseOf, PhasePlan, file_change
from agent.phases.facts import ClockChecked
from agent.phases.time import chronyc
from agent.phases.time.clock import clock_state
from agent.phases.time.gate import GateOutcome, wait_until_synchronised
from agent.phases.time.ntpcheck import (
    QUERY_TIMEOUT,
    ServerCheck,
    check_servers,
    format_seconds,
)
from agent.phases.time.render import render
from agent.phases.time.result import ChronySource, TimeResult
from agent.state import digest

if TYPE_CHECKING:
    from agent.phases.checks import Check, Doctor

RELOAD = "reload"
"""Journal key of the reload step."""


class TimePhase(PhaseOf[TimeResult]):
    name = "time"
    condition = "TimeSynchronized"
    success = Reason.TimeSynchronized
    provides = (ClockChecked,)
    Result = TimeResult
    reconfigurable = True

    def doctor_checks(self, doctor: Doctor) -> Iterator[Check]:
        from agent.phases.time.doctor import checks  # only `doctor` asks: not in a run

        return checks(self, doctor)

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        spec = ctx.config.spec.time
        plan = PhasePlan(self.name)
        if not spec.servers:
            return plan
        rendered = render(spec)
        change = file_change(ctx.host, rendered.path, rendered.content)
        if change is not None:
            # With a probe the write is journaled as intended before it runs: killed
            # right after it, the next run still owes the reload (_reload_unfinished).
            path = rendered.path
            change = dataclasses.replace(change, probe=lambda h: digest(h.read_text(path)))
            plan.changes.append(change)
        if change is not None or _reload_unfinished(ctx, f"write:{rendered.path}"):
            summary, action, argv = _reload(spec)
            plan.changes.append(Change(RELOAD, summary, action, argv=argv))
        plan.notes.append(
            f"wait up to {spec.sync_timeout} until {spec.renderer} reports the clock "
            f"synchronised within {spec.max_offset} of: "
            + ", ".join(s.address for s in spec.servers))
        return plan

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> TimeResult:
        spec = ctx.config.spec.time
        if not spec.servers:
            return TimeResult(gated=False)
        # ntplib never waits longer for one server than the whole gate may.
        query_timeout = min(QUERY_TIMEOUT, spec.sync_timeout)
        checks = check_servers(spec.servers, query_timeout)
        for check in checks:
            (ctx.log.info if check.reachable else ctx.log.warning)("ntp: %s", check.summary())
        outcome = wait_until_synchronised(
            lambda: clock_state(ctx.host, spec, checks), max_offset=spec.max_offset,
            timeout=spec.sync_timeout, interval=spec.check_interval, clock=ctx.host.clock,
            progress=ctx.progress)
        daemon_view = _chrony_sources(ctx.host, spec)
        if outcome.opened:
            return _result(spec, outcome, checks, daemon_view)
        # Ask again: the answer at the time-out is the one worth reporting.
        message = _timeout_message(spec, outcome, check_servers(spec.servers, query_timeout),
                                   daemon_view)
        if spec.on_timeout == "warn":
            ctx.log.warning("%s; continuing because spec.time.onTimeout is warn", message)
            return dataclasses.replace(_result(spec, outcome, checks, daemon_view),
                                       warning=message)
        raise TemporaryError(message, reason=Reason.TimeNotSynchronized)

    def reason(self, result: TimeResult) -> Reason:
        return Reason.TimeNotSynchronized if result.warning is not None else self.success

    def message(self, result: TimeResult) -> str:
        if not result.gated:
            return ("no NTP servers in spec.time.servers: the image's time configuration "
                    "is left alone and join is not gated on it")
        if result.warning is not None:
            return f"{result.warning}; join goes on because spec.time.onTimeout is warn"
        unreachable = [s for s in result.servers if not s.reachable]
        text = (f"clock synchronised to {result.reference or 'a source'} (stratum "
                f"{result.stratum}), offset {format_seconds(result.offset)} within "
                f"{format_seconds(result.max_offset).lstrip('+')}")
        if unreachable:
            text += "; unreachable: " + ", ".join(
                f"{s.server} ({s.error or 'no answer'})" for s in unreachable)
        return text


def _reload_unfinished(ctx: PhaseContext, write_key: str) -> bool:
    """The file was written in an interrupted run of these inputs but the daemon was not
    reloaded yet: the file is up to date now, yet the reload must still happen. A write
    only intended (killed after writing, before journaling it done) counts: if it did
    not happen after all, the file differs and the reload is planned anyway."""
    record = ctx.journal.phases.get("time")
    return (record is not None and record.state != "completed"
            and (write_key in record.steps or write_key in record.intents)
            and RELOAD not in record.steps)


def _reload(spec: TimeSpec) -> tuple[str, Callable[[Host], None], tuple[str, ...]]:
    """How the daemon is made to read the new file: spec.time.reloadCommand, or the
    renderer's own way; with the command it runs."""
    if spec.reload_command:
        argv = list(spec.reload_command)
        return f"reload: {' '.join(argv)}", lambda h: _run(h, argv), tuple(argv)
    if spec.renderer == "timesyncd":
        return ("restart systemd-timesyncd", _restart("systemd-timesyncd"),
                ("systemctl", "restart", "systemd-timesyncd"))
    if spec.chrony.target == "dropin":
        argv = chronyc.chronyc_argv(spec.chrony, "reload", "sources")
        return (f"reload chronyd's sources: {' '.join(argv)}", lambda h: _run(h, argv),
                tuple(argv))
    return ("restart chronyd: systemctl restart chrony", _restart("chrony"),
            ("systemctl", "restart", "chrony"))


def _run(host: Host, argv: list[str]) -> None:
    host.run(argv, timeout=60)


def _restart(unit: str) -> Callable[[Host], None]:
    def restart(host: Host) -> None:
        host.systemctl("restart", unit)
    return restart


def _chrony_sources(host: Host, spec: TimeSpec) -> list[chronyc.Source]:
    """chronyd's own view of its sources, for status and the time-out message; empty when
    the renderer is not chrony or chronyd does not answer (the gate said why already)."""
    if spec.renderer != "chrony":
        return []
    try:
        return chronyc.read_sources(host, spec.chrony)
    except AgentError:
        return []


def _result(spec: TimeSpec, outcome: GateOutcome, checks: list[ServerCheck],
            daemon_view: list[chronyc.Source]) -> TimeResult:
    last = outcome.last
    return TimeResult(
        synchronised=outcome.opened, offset=last.offset if last else None,
        stratum=last.stratum if last else None, reference=last.reference if last else "",
        max_offset=float(spec.max_offset), waited=round(outcome.waited, 3),
        servers=list(checks),
        chrony_sources=[ChronySource(s.name, s.state, f"{s.reach:o}") for s in daemon_view])


def _timeout_message(spec: TimeSpec, outcome: GateOutcome, checks: list[ServerCheck],
                     daemon_view: list[chronyc.Source]) -> str:
    seen = (outcome.error if outcome.error is not None
            else outcome.last.describe() if outcome.last else "no answer")
    text = (f"clock not synchronised within {spec.sync_timeout} (allowed offset "
            f"{spec.max_offset}; {spec.renderer}: {seen}); servers tried: "
            + "; ".join(c.summary() for c in checks))
    if daemon_view:
        text += "; chronyd's sources: " + ", ".join(
            f"{s.name} {'never reached' if s.reach == 0 else f'reach {s.reach:o}'}"
            for s in daemon_view)
    return text
