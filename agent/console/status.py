"""`machine-agent status`: this boot's outcome from the status file and the journal, as a
table, a long per-phase view, or a JSON/YAML document in the Machine's camelCase; the
exit status says the outcome as `cloud-init status` does.

Exit status (also `status --wait`, see agent.console.wait):
  0  bootstrapped, or no outcome yet (a run in progress, or none started this boot)
  1  failed: a phase failed, or the run ended without every phase done
  2  bootstrapped with recoverable problems (a phase completed with a warning, e.g.
     the clock not synchronised with spec.time.onTimeout: warn)
  4  disabled by the kill switch, and no outcome this boot: no run will come
"""

from __future__ import annotations

import json
from dataclasses import field
from typing import Any, Literal

from agent.console.killswitch import disabled_by
from agent.console.timeline import analyze, seconds_between
from agent.errors import Reason
from agent.host import Host
from agent.printable import printable
from agent.recordtype import record
from agent.report import SUMMARY, from_previous_boot, read_status_document
from agent.state import Journal, PhaseRecord

Outcome = Literal["bootstrapped", "degraded", "failed", "incomplete", "running",
                  "not-started", "disabled", "timeout"]

EXIT_OK, EXIT_FAILED, EXIT_DEGRADED, EXIT_DISABLED = 0, 1, 2, 4
EXIT_TIMEOUT = 124
"""`status --wait`: no outcome within --timeout (as timeout(1) exits)."""

EXIT_CODES: dict[Outcome, int] = {
    "bootstrapped": EXIT_OK, "running": EXIT_OK, "not-started": EXIT_OK,
    "failed": EXIT_FAILED, "incomplete": EXIT_FAILED, "degraded": EXIT_DEGRADED,
    "disabled": EXIT_DISABLED, "timeout": EXIT_TIMEOUT,
}

HEALTHY = frozenset(r for r in Reason if r.info.healthy)
"""Reasons that say nothing is wrong (agent/errors.py). A True condition with any other
reason completed with a problem the node lives with: the outcome is `degraded`."""


@record
class StatusView:
    """What `status` shows, read once."""

    outcome: Outcome
    conditions: list[dict[str, str]] = field(default_factory=list)
    final: bool = False
    previous_boot: bool = False
    disabled: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    phases: dict[str, PhaseRecord] = field(default_factory=dict)
    status_file: dict[str, Any] | None = None
    """The status file as read (its timeline: agent.console.timeline)."""

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]

    @property
    def summary(self) -> dict[str, str] | None:
        return next((c for c in self.conditions if c["type"] == SUMMARY), None)

    def document(self) -> dict[str, Any]:
        """The JSON/YAML document: camelCase, as the Machine's status.conditions."""
        return {
            "outcome": self.outcome,
            "final": self.final,
            "previousBoot": self.previous_boot,
            "disabled": self.disabled,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "conditions": self.conditions,
            "phases": {name: _phase_document(rec) for name, rec in self.phases.items()},
        }


def read_view(host: Host) -> StatusView:
    """This boot's outcome as the status file and the journal say."""
    doc = read_status_document(host)
    previous = doc is not None and from_previous_boot(host)
    disabled = disabled_by(host)
    journal = Journal.load(host)
    if doc is None or previous:
        return StatusView("disabled" if disabled else "not-started", previous_boot=previous,
                          disabled=disabled, phases=journal.phases,
                          conditions=[_camel(c) for c in (doc or {}).get("conditions", [])])
    conditions = [_camel(c) for c in doc.get("conditions", [])]
    final = bool(doc.get("final"))
    view = StatusView("running", conditions, final, False, disabled, doc.get("startedAt"),
                      doc.get("finishedAt"), journal.phases, doc)
    view.outcome = _outcome(view)
    return view


def _outcome(view: StatusView) -> Outcome:
    summary = view.summary
    if not view.final:
        # Interrupted and switched off since: no run will finish it.
        return "disabled" if view.disabled else "running"
    if summary is None or summary["status"] == "Unknown":
        return "incomplete"
    if summary["status"] == "False":
        return "failed"
    problems = [c for c in view.conditions
                if c["status"] == "True" and c["reason"] not in HEALTHY]
    return "degraded" if problems else "bootstrapped"


def _camel(condition: dict[str, str]) -> dict[str, str]:
    """A condition as the status file keeps it, in the Machine's casing."""
    return {"type": condition["type"], "status": condition["status"],
            "reason": condition["reason"], "message": condition["message"],
            "lastTransitionTime": condition["last_transition_time"]}


def _phase_document(rec: PhaseRecord) -> dict[str, Any]:
    return {"state": rec.state, "startedAt": rec.started_at, "finishedAt": rec.finished_at,
            "seconds": seconds_between(rec.started_at, rec.finished_at),
            "attempts": rec.attempts, "reason": rec.reason, "message": rec.message,
            "result": rec.result}


# -- text -------------------------------------------------------------------------------

def render_table(view: StatusView) -> str:
    """One row per condition. A message of several lines continues under the message
    column, so the columns of later rows stay aligned."""
    lines = [_headline(view)]
    rows = [(c["type"], c["status"], c["reason"], c["message"]) for c in view.conditions]
    if rows:
        widths = [max(len(r[i]) for r in [*rows, ("TYPE", "STATUS", "REASON", "")])
                  for i in range(3)]
        lines.append(_row(("TYPE", "STATUS", "REASON", "MESSAGE"), widths))
        lines += [_row(r, widths) for r in rows]
    return "\n".join(lines)


def _row(cells: tuple[str, str, str, str], widths: list[int]) -> str:
    head = "  ".join(cell.ljust(w) for cell, w in zip(cells[:3], widths, strict=True))
    indent = " " * (len(head) + 2)
    message = _lines(cells[3])
    return "\n".join([f"{head}  {message[0]}".rstrip(),
                      *(f"{indent}{more}".rstrip() for more in message[1:])])


def _lines(message: str) -> list[str]:
    """A message's lines, every other control character escaped (a carriage return or
    an escape sequence in a command's output would rewrite the terminal)."""
    return printable(message, lines=True).rstrip("\n").split("\n")


def render_long(view: StatusView, phase_of: dict[str, str]) -> str:
    """Each condition with its phase's timing, attempts, reason and whole message.
    `phase_of` maps a condition type to its phase's name."""
    lines = [_headline(view)]
    # This run's timing to the millisecond from the timeline; the journal's (to the
    # second) for a phase this run did not run.
    spans = {s.phase: s for s in analyze(view.status_file, phase_of).spans
             if s.kind == "phase"}
    if view.started_at:
        took = seconds_between(view.started_at, view.finished_at)
        lines.append(f"run:      started {view.started_at}" +
                     (f", finished {view.finished_at} ({took:g}s)" if took is not None
                      else ", not finished"))
    for c in view.conditions:
        lines.append("")
        lines.append(f"{c['type']}: {c['status']} ({c['reason']}) since "
                     f"{c['lastTransitionTime']}")
        rec = view.phases.get(phase_of.get(c["type"], ""))
        if rec is not None:
            span = spans.get(rec.phase)
            took = span.seconds if span else seconds_between(rec.started_at, rec.finished_at)
            timing = f"{took:g}s" if took is not None else "not finished"
            attempts = f"{rec.attempts} attempt{'s' if rec.attempts != 1 else ''}"
            lines.append(f"  phase:    {rec.phase}, {rec.state}, {attempts}")
            lines.append(f"  started:  {rec.started_at}")
            lines.append(f"  finished: {rec.finished_at or '-'} ({timing})")
        message = _lines(c["message"])
        lines.append(f"  message:  {message[0]}")
        lines += [f"            {more}" for more in message[1:]]
        if c["status"] != "True" and c["reason"] in Reason.__members__:
            lines.append(f"  fix:      {Reason(c['reason']).info.fix}")
    return "\n".join(lines)


def _headline(view: StatusView) -> str:
    words = {
        "bootstrapped": "bootstrapped",
        "degraded": "bootstrapped, with recoverable problems (see the conditions)",
        "failed": "failed",
        "incomplete": "finished without every phase done",
        "running": "running (or interrupted: the next start resumes it)",
        "not-started": "no run recorded on this boot yet",
        "disabled": f"disabled ({view.disabled}): no run will come",
        "timeout": "no outcome yet",
    }
    line = f"status: {words[view.outcome]}"
    if view.previous_boot:
        line += "\n(the conditions below are from a previous boot)"
    elif view.outcome == "not-started" and not view.conditions:
        line += " (nothing under /var/lib/machine-agent)"
    return line


def render(view: StatusView, fmt: str, *, long: bool = False,
           phase_of: dict[str, str] | None = None) -> str:
    if fmt == "json":
        return json.dumps(view.document(), indent=2)
    if fmt == "yaml":
        import yaml

        return yaml.safe_dump(view.document(), sort_keys=False).rstrip("\n")
    return render_long(view, phase_of or {}) if long else render_table(view)


def condition_phases() -> dict[str, str]:
    """Condition type → phase name, from the phases themselves."""
    from agent.phases import registry

    return {p.condition: p.name for p in registry.load()}
