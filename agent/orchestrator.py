"""The flat orchestrator: runs the phases in order, journals and reports each.

It knows nothing about networks or kubeadm: a phase is planned (pure), applied, verified;
temporary errors are retried with jittered backoff; the first permanent failure stops
the run, and later phases stay Pending with the reason pointing at it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import field
from typing import Literal

from agent.config import LoadedConfig
from agent.errors import AgentError, PermanentError, Reason
from agent.host import Host
from agent.kube.client import Client
from agent.kube.facts import MachineFacts
from agent.kube.reporter import MachineReporter
from agent.logs import in_phase
from agent.phases import registry
from agent.phases.base import Phase, PhaseContext, PhasePlan, PhaseResult, Results
from agent.recordtype import record
from agent.report import SUMMARY, Conditions, Reporter, last_outcome
from agent.report.conditions import Status
from agent.retry import Backoff, retry
from agent.state import Journal, digest

log = logging.getLogger(__name__)

MACHINE_DELETED = "the Machine was deleted: no more bootstrapping for it"
"""Why a run stops when a report finds the Machine gone (404 on its status)."""

Outcome = Literal["applied", "up-to-date", "skipped", "failed", "pending"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_RETRY_LATER = 0, 1, 2, 3


@record
class PhaseOutcome:
    phase: str
    outcome: Outcome
    changes: int = 0
    reason: str = ""
    message: str = ""
    temporary: bool = False


@record
class RunResult:
    outcomes: list[PhaseOutcome] = field(default_factory=list)
    temporary: bool = False

    @property
    def ok(self) -> bool:
        return all(o.outcome in ("applied", "up-to-date", "skipped") for o in self.outcomes)

    @property
    def exit_code(self) -> int:
        if self.ok:
            return EXIT_OK
        return EXIT_RETRY_LATER if self.temporary else EXIT_FAILED


def select_phases(phases: list[Phase], only: Iterable[str] = (),
                  skip: Iterable[str] = ()) -> list[Phase]:
    """The phases to run; unknown names are an error that lists the known ones."""
    only, skip = set(only), set(skip)
    known = {p.name for p in phases}
    unknown = sorted((only | skip) - known)
    if unknown:
        raise PermanentError(f"unknown phase {', '.join(unknown)}",
                             hint=f"phases are: {', '.join(p.name for p in phases)}")
    return [p for p in phases if (not only or p.name in only) and p.name not in skip]


class Orchestrator:
    def __init__(
        self,
        loaded: LoadedConfig,
        host: Host,
        *,
        phases: list[Phase] | None = None,
        reporters: list[Reporter] | None = None,
        machine: MachineFacts | None = None,
        management: Client | None = None,
        reload_machine: Callable[[], MachineFacts] | None = None,
    ) -> None:
        self.config = loaded.config
        self.machine = machine
        self._reload_machine = reload_machine
        self.management = management
        self.host = host
        self.phases = phases if phases is not None else registry.load()
        self.reporters = reporters or []
        self._summarize = True
        """Whether the run sets the summary (run(summarize=...))."""
        self.journal = Journal.load(host)
        last = last_outcome(host)
        self.conditions = Conditions(host, [p.condition for p in self.phases],
                                     last[0] if last else None)
        self.results = Results({
            p.name: p.result_from(rec.result) for p in self.phases
            if (rec := self.journal.phases.get(p.name)) is not None
            and rec.state == "completed"})

    def _context(self, host: Host, phase: Phase, *, show_secrets: bool = False
                 ) -> PhaseContext:
        def progress(message: str, reason: Reason = Reason.InProgress) -> None:
            log.info("%s", message, extra={"phase": phase.name})
            self.conditions.set(phase.condition, "Unknown", reason, message)
            self._publish(final=False)

        return PhaseContext(self.config, host, self.journal, self.results, progress,
                            logging.getLogger(f"agent.phases.{phase.name}"), self.machine,
                            reload_machine=self._reload if self._reload_machine else None,
                            management=self.management, show_secrets=show_secrets)

    def _reload(self) -> MachineFacts:
        """Read the Machine again; later plans (a retried attempt) use what was read."""
        assert self._reload_machine is not None
        self.machine = self._reload_machine()
        return self.machine

    def plan(self, only: Iterable[str] = (), skip: Iterable[str] = (), *,
             show_secrets: bool = False) -> list[PhasePlan]:
        """Every selected phase's plan, computed against a read-only host, but those of
        spec.skipPhases (`run` skips them); `show_secrets`: with the bootstrap data's
        contents (PhaseContext.show_secrets)."""
        view = self.host.read_only_view()
        return [p.plan(self._context(view, p, show_secrets=show_secrets))
                for p in select_phases(self.phases, only, skip)
                if p.name not in self.config.spec.skip_phases]

    def drifted(self) -> list[str]:
        """Phases completed with the current inputs whose result the node no longer shows
        (`Phase.still_holds`, asked read-only): what a run would apply again."""
        found = []
        for phase in self.phases:
            if phase.name in self.config.spec.skip_phases or \
                    not self.journal.is_current(phase.name, digest(phase.inputs(self.config))):
                continue
            before = phase.result_from(self.journal.phases[phase.name].result)
            if not phase.still_holds(self._context(self.host.read_only_view(), phase), before):
                found.append(phase.name)
        return found

    def report(self, kind: str, status: Status, reason: Reason, message: str) -> None:
        """Set a condition beside the phases' and publish it (an Event on a change)."""
        self.conditions.set(kind, status, reason, message)
        self._publish(final=True)

    def run(self, only: Iterable[str] = (), skip: Iterable[str] = (), *,
            summarize: bool = True) -> RunResult:
        """Run the selected phases; with `summarize`, set the summary condition and
        publish the final report (the daemon's trial of a changed configuration holds
        both back until it knows whether the change stays)."""
        selected = select_phases(self.phases, only, skip)
        self._summarize = summarize
        result = RunResult()
        blocked: PhaseOutcome | None = None
        for phase in selected:
            if phase.name in self.config.spec.skip_phases:
                self.conditions.set(phase.condition, "True", Reason.Skipped,
                                    "skipped by spec.skipPhases")
                result.outcomes.append(PhaseOutcome(phase.name, "skipped"))
                continue
            if blocked is None and self._machine_deleted():
                self.conditions.set(phase.condition, "Unknown", Reason.Pending,
                                    MACHINE_DELETED)
                result.outcomes.append(PhaseOutcome(phase.name, "pending",
                                                    message=MACHINE_DELETED))
                result.temporary = False
                continue
            if blocked is not None:
                message = f"waiting for the {blocked.phase} phase ({blocked.reason})"
                self.conditions.set(phase.condition, "Unknown", Reason.Pending, message)
                result.outcomes.append(PhaseOutcome(phase.name, "pending", message=message))
                continue
            outcome = self._run_phase(phase)
            result.outcomes.append(outcome)
            if outcome.outcome == "failed":
                blocked = outcome
                result.temporary = outcome.temporary
        if summarize:
            self.summarize()
        return result

    def _run_phase(self, phase: Phase) -> PhaseOutcome:
        with in_phase(phase.name):
            return self._run_phase_now(phase)

    def _run_phase_now(self, phase: Phase) -> PhaseOutcome:
        name = phase.name
        inputs = digest(phase.inputs(self.config))
        if self.journal.is_current(name, inputs):
            rec = self.journal.phases[name]
            before = phase.result_from(rec.result)
            if phase.still_holds(self._context(self.host.read_only_view(), phase), before):
                log.info("up to date: completed %s with the same inputs; nothing to apply",
                         rec.finished_at, extra={"phase": name})
                self.conditions.set(phase.condition, "True", phase.reason(before),
                                    phase.message(before))
                self._reported(phase, before)
                return PhaseOutcome(name, "up-to-date", reason=str(Reason.UpToDate))
            log.warning("completed %s with the same inputs, but the node no longer shows "
                        "it; applying again", rec.finished_at, extra={"phase": name})
        self.conditions.set(phase.condition, "Unknown", Reason.InProgress, "running")
        self._summary_running(phase)
        self._publish(final=False)
        self.journal.start(name, inputs)
        ctx = self._context(self.host, phase)
        applied = 0

        def attempt() -> PhaseResult:
            nonlocal applied
            plan = phase.plan(self._context(self.host.read_only_view(), phase))
            applied = len(plan.changes)
            phase.apply(ctx, plan)
            proved: PhaseResult = phase.verify(ctx, plan)
            return proved

        spec = self.config.spec.retry
        backoff = Backoff(base=spec.initial_delay, cap=spec.max_delay, attempts=spec.attempts)
        def retrying(err: AgentError, n: int, pause: float) -> None:
            if self._machine_deleted():  # no Machine waits for this node any more
                raise PermanentError(MACHINE_DELETED, reason=Reason.MachineNotFound)
            log.warning("attempt %d failed (%s); retrying in %.1fs", n, err, pause,
                        extra={"phase": name, "reason": str(err.reason), "attempt": n})
            self.journal.retrying(name)

        try:
            out = retry(attempt, backoff, sleep=self.host.clock.sleep, on_retry=retrying)
        except AgentError as err:
            return self._failed(phase, err.reason, str(err), err.temporary)
        except Exception as err:  # a bug: report it rather than die silently
            log.exception("internal error", extra={"phase": name})
            return self._failed(phase, Reason.InternalError, f"{type(err).__name__}: {err}",
                                False)
        self.journal.complete(name, out.to_json())
        self.results[name] = out
        message = phase.message(out)
        reason = phase.reason(out)
        self.conditions.set(phase.condition, "True", reason, message)
        self._reported(phase, out)
        log.info("done: %s", message, extra={"phase": name})
        return PhaseOutcome(name, "applied", changes=applied, reason=str(reason),
                            message=message)

    def _reported(self, phase: Phase, result: PhaseResult) -> None:
        for kind, reason, message in phase.reported(result):
            self.conditions.set(kind, "True", reason, message)

    def _failed(self, phase: Phase, reason: Reason, message: str,
                temporary: bool) -> PhaseOutcome:
        log.error("failed: %s", message, extra={"phase": phase.name, "reason": str(reason)})
        self.journal.fail(phase.name, str(reason), message)
        self.conditions.set(phase.condition, "False", reason, message)
        return PhaseOutcome(phase.name, "failed", reason=str(reason), message=message,
                            temporary=temporary)

    def _summary_running(self, phase: Phase) -> None:
        """The summary while a bootstrap runs: which phase runs and which are done (CAPI
        shows it in the Machine's Ready message). A node that has bootstrapped keeps its
        True summary (a phase applied again does not make the Machine not Ready), and a
        run that holds its summary back (a trial of a changed configuration) too."""
        if not self._summarize or self.conditions.get(SUMMARY).status == "True":
            return
        done = [p.condition for p in self.phases
                if self.conditions.get(p.condition).status == "True"]
        self.conditions.set(SUMMARY, "Unknown", Reason.InProgress,
                            f"{phase.name} running ({phase.condition})"
                            + (f"; done: {', '.join(done)}" if done else ""))

    def summarize(self) -> None:
        """Set the summary condition from the phases' conditions; publish as final."""
        states = [self.conditions.get(p.condition) for p in self.phases]
        failed = next((c for c in states if c.status == "False"), None)
        if failed is not None:
            self.conditions.set(SUMMARY, "False", Reason(failed.reason),
                                f"{failed.type}: {failed.message}")
        elif all(c.status == "True" for c in states):
            self.conditions.set(SUMMARY, "True", Reason.Bootstrapped, "all phases completed")
        else:
            waiting = ", ".join(c.type for c in states if c.status != "True")
            self.conditions.set(SUMMARY, "Unknown", Reason.Pending, f"not yet done: {waiting}")
        self._publish(final=True)

    def _machine_deleted(self) -> bool:
        """Whether a report found the Machine gone (MachineReporter.machine_deleted)."""
        return any(isinstance(r, MachineReporter) and r.machine_deleted
                   for r in self.reporters)

    def _publish(self, final: bool) -> None:
        for reporter in self.reporters:
            reporter.publish(self.conditions.all(), final)

