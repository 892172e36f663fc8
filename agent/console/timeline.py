"""`machine-agent analyze`: where this boot's run spent its time, per phase and per
external wait inside it (a gateway's answer, the clock's synchronisation, kubeadm join,
the Node's registration), like `cloud-init analyze blame`.

It reads the timeline the status file keeps (agent.report.LocalStatus): every condition
change with its time. A phase runs from its first report of work to its True or False;
a wait is a progress report of the phase ("waiting for ...", "checking that ..."), and
lasts until the phase's next report. The time before the first phase is the set-up:
reading the configuration, cloud-init's instance data, the Machine and its bootstrap
data.
"""

from __future__ import annotations

import json
from dataclasses import asdict, field
from datetime import datetime
from typing import Any

from agent.recordtype import record
from agent.report import SUMMARY

SETUP = "(set-up: configuration, cloud-init, the Machine and its bootstrap data)"


@record
class Span:
    name: str
    kind: str
    """`setup`, `phase` or `wait`."""
    start: str
    seconds: float
    phase: str | None = None
    outcome: str | None = None
    """For a phase: True, False, or Unknown when the run stopped inside it."""


@record
class Analysis:
    started_at: str | None
    finished_at: str | None
    seconds: float | None
    outcome: str | None
    spans: list[Span] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        return {"startedAt": self.started_at, "finishedAt": self.finished_at,
                "seconds": self.seconds, "outcome": self.outcome,
                "spans": [asdict(s) for s in self.spans]}


def analyze(doc: dict[str, Any] | None, phase_of: dict[str, str]) -> Analysis:
    """The spans of the run the status file `doc` describes; `phase_of` maps condition
    types to phase names, in the phases' order."""
    if not doc or not doc.get("startedAt"):
        return Analysis(None, None, None, None)
    events = [e for e in doc.get("events", []) if e.get("at")]
    start = _t(doc["startedAt"])
    last = _t(events[-1]["at"]) if events else start
    end = _t(doc["finishedAt"]) if doc.get("finishedAt") else last
    summary = next((c for c in doc.get("conditions", []) if c["type"] == SUMMARY), None)
    result = Analysis(doc["startedAt"], doc.get("finishedAt"), _secs(start, end),
                      summary["reason"] if summary and doc.get("final") else None)
    phases: list[Span] = []
    for kind, phase in phase_of.items():
        phases += _phase_spans(kind, phase, [e for e in events if e["type"] == kind], end)
    first = min((_t(s.start) for s in phases), default=None)
    if first is not None and first > start:
        result.spans.append(Span(SETUP, "setup", doc["startedAt"], _secs(start, first)))
    result.spans += phases
    return result


def _phase_spans(kind: str, phase: str, events: list[dict[str, str]],
                 run_end: datetime) -> list[Span]:
    began = next((i for i, e in enumerate(events)
                  if e["status"] == "Unknown" and e["reason"] != "Pending"), None)
    if began is None:
        return []  # not run this time: up to date, skipped, or waiting on another phase
    ended = next((i for i in range(began + 1, len(events))
                  if events[i]["status"] in ("True", "False")), None)
    end = _t(events[ended]["at"]) if ended is not None else run_end
    outcome = events[ended]["status"] if ended is not None else "Unknown"
    head = Span(phase, "phase", events[began]["at"], _secs(_t(events[began]["at"]), end),
                phase, outcome)
    waits: list[Span] = []
    stop = ended if ended is not None else len(events)
    for i in range(began, stop):
        e = events[i]
        if e["status"] != "Unknown" or e["message"] == "running":
            continue  # the orchestrator's own "running": the phase's work, not a wait
        until = _t(events[i + 1]["at"]) if i + 1 < len(events) else end
        waits.append(Span(e["message"], "wait", e["at"], _secs(_t(e["at"]), until), phase))
    return [head, *waits]


def seconds_between(start: str | None, end: str | None) -> float | None:
    """Seconds from one of the agent's UTC stamps to another; None when either is
    missing or unreadable."""
    try:
        a, b = parse_stamp(start), parse_stamp(end)
    except ValueError:
        return None
    if a is None or b is None:
        return None
    return round((b - a).total_seconds(), 3)


def parse_stamp(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _t(stamp: str) -> datetime:
    parsed = parse_stamp(stamp)
    assert parsed is not None
    return parsed


def _secs(a: datetime, b: datetime) -> float:
    return round(max(0.0, (b - a).total_seconds()), 3)


def render(analysis: Analysis, fmt: str = "text", *, blame: int = 5) -> str:
    if fmt == "json":
        return json.dumps(analysis.document(), indent=2)
    if analysis.started_at is None:
        return "no run recorded with a timeline (nothing under /var/lib/machine-agent)"
    took = f"{analysis.seconds:.3f}s" if analysis.seconds is not None else "?"
    state = analysis.outcome or "not finished"
    lines = [f"-- run started {analysis.started_at}: {took}, {state}"]
    for s in analysis.spans:
        indent = "    " if s.kind == "wait" else ""
        note = {"False": " (failed)", "Unknown": " (stopped here)"}.get(s.outcome or "", "")
        lines.append(f"{indent}{s.seconds:10.3f}s  {s.name}{note}")
    slowest = sorted((s for s in analysis.spans if s.kind != "phase"),
                     key=lambda s: s.seconds, reverse=True)[:blame]
    if slowest:
        lines += ["", "-- slowest waits (blame)"]
        lines += [f"{s.seconds:10.3f}s  {s.phase + ': ' if s.phase else ''}{s.name}"
                  for s in slowest]
    return "\n".join(lines)
