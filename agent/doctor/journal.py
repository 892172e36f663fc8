"""The journal and the reports: the journal readable and consistent (agent/state.py), the
last conditions published, and whether they reached the Machine (the reporter keeps
what is undelivered in the journal's section `reports`, agent/kube/reporter.py)."""

from __future__ import annotations

from collections.abc import Iterator

from agent.errors import AgentError, StateError
from agent.kube.client import resource_path
from agent.kube.machine import GROUP
from agent.kube.reporter import Reports
from agent.phases.checks import Check, Doctor
from agent.report import SUMMARY, read_status
from agent.state import JOURNAL, Journal

PHASE = "journal"
MOVE_ASIDE = (f"move {JOURNAL} aside (keep it for the report); the next run re-plans from "
              "the host's state")


def checks(doctor: Doctor) -> Iterator[Check]:
    try:
        journal = Journal.load(doctor.host)
    except AgentError as err:
        yield Check(PHASE, "journal", "fail", err.message, err.hint or MOVE_ASIDE)
        return
    problems = list(_inconsistencies(journal, tuple(p.name for p in doctor.phases)))
    if problems:
        yield Check(PHASE, "journal", "fail", "; ".join(problems), MOVE_ASIDE)
    else:
        states = ", ".join(f"{n} {r.state}" for n, r in journal.phases.items())
        yield Check(PHASE, "journal", "pass", f"consistent: {states or 'no phase run yet'}")
    yield from _conditions(doctor)
    yield from _reports(doctor, journal)


def _inconsistencies(journal: Journal, phases: tuple[str, ...]) -> Iterator[str]:
    for name, rec in journal.phases.items():
        if name not in phases or rec.phase != name:
            yield f"unknown phase record {name!r}"
        if rec.state not in ("started", "completed", "failed"):
            yield f"{name}: unknown state {rec.state!r}"
        if rec.state == "completed" and (rec.steps or rec.intents or not rec.finished_at):
            yield f"{name}: completed but with unfinished steps or no finish time"
        if rec.state == "failed" and not rec.reason:
            yield f"{name}: failed without a reason"
        if not str(rec.digest).startswith("sha256:"):
            yield f"{name}: inputs digest {rec.digest!r} is not a sha256 digest"
    done = [n for n in phases if (r := journal.phases.get(n)) and r.state == "completed"]
    for later in done:
        for earlier in phases[:phases.index(later)]:
            before = journal.phases.get(earlier)
            if before is not None and before.state != "completed":
                yield f"{later} completed although the earlier {earlier} is {before.state}"


def _conditions(doctor: Doctor) -> Iterator[Check]:
    try:
        status = read_status(doctor.host)
    except StateError as err:
        yield Check(PHASE, "conditions", "fail", str(err),
                    "run `machine-agent run` again; it rewrites the file")
        return
    if status is None:
        yield Check(PHASE, "conditions", "warn", "no run recorded yet",
                    "run `machine-agent run`")
        return
    conditions, final = status
    summary = next((c for c in conditions if c.type == SUMMARY), None)
    failed = [c for c in conditions if c.status == "False"]
    seen = (f"{summary.type} {summary.status} {summary.reason}: {summary.message}"
            if summary else "no summary condition")
    if not final:
        seen += " (a run is in progress or was interrupted)"
    details = {c.type: {"status": c.status, "reason": c.reason} for c in conditions}
    if failed:
        first = failed[0]
        yield Check(PHASE, "conditions", "fail", seen, f"{first.type} is {first.reason}: "
                    f"{first.message}; see the failing checks above", details)
    else:
        yield Check(PHASE, "conditions", "pass", seen, details=details)


def _reports(doctor: Doctor, journal: Journal) -> Iterator[Check]:
    if Reports.KEY not in journal.stored:
        if doctor.machine is not None and journal.phases:
            yield Check(PHASE, "reported", "warn", "no report to the Machine recorded",
                        "check spec.reporting")
        return
    state = journal.section(Reports)
    recorded = state.conditions
    if state.pending:
        yield Check(PHASE, "reported", "warn",
                    f"not yet delivered to Machine {state.machine}: "
                    f"{'conditions' if state.dirty else ''}"
                    f"{' and ' if state.dirty and state.events else ''}"
                    f"{len(state.events)} Event(s)"
                    if state.events else
                    f"conditions not yet delivered to Machine {state.machine}",
                    "the next run (or the running agent) delivers them once the "
                    "management cluster answers; see the management checks")
        return
    if doctor.client is None or doctor.machine is None:
        yield Check(PHASE, "reported", "pass", f"delivered to Machine {state.machine} "
                    "(per the journal; the Machine was not read)")
        return
    view = doctor.machine
    obj = doctor.client.get(resource_path(GROUP, view.version, "machines",
                                          namespace=view.facts.namespace,
                                          name=view.facts.name))
    status = obj.get("status") or {}
    on_api = {c.get("type"): c for c in ((status.get("v1beta2") or {}).get("conditions")
                                         if view.version == "v1beta1"
                                         else status.get("conditions")) or []}
    stale = sorted(t for t, c in recorded.items()
                   if (on_api.get(t) or {}).get("status") != c.get("status")
                   or (on_api.get(t) or {}).get("reason") != c.get("reason"))
    if stale:
        yield Check(PHASE, "reported", "fail",
                    f"the Machine shows other values for {', '.join(stale)} than the agent "
                    "delivered", "another writer changes the agent's conditions; check the "
                    "Machine's managedFields")
    else:
        yield Check(PHASE, "reported", "pass", f"{len(recorded)} condition(s) on Machine "
                    f"{state.machine} match the last report")
