"""The run's outcome as Prometheus metrics, in a node_exporter textfile: where operators
already look, beside the node's other metrics.

Written at the end of every run (the final report), atomically (node_exporter never reads
half a file), into `spec.reporting.metricsTextfile`, only where its directory exists: a
node without node_exporter's textfile collector gets nothing. Durations come from the
status file's timeline (milliseconds, what `analyze` reads), attempts from the journal.
"""

from __future__ import annotations

import posixpath
from datetime import datetime
from typing import Any

from agent.host import Host
from agent.report.conditions import SUMMARY, Condition
from agent.report.local import read_status_document
from agent.state import Journal

_HELP = {
    "machine_agent_bootstrapped": "1 when every phase completed in the last run, else 0.",
    "machine_agent_last_run_timestamp_seconds": "When the last run ended (Unix time).",
    "machine_agent_run_duration_seconds": "How long the last run took.",
    "machine_agent_phase_duration_seconds":
        "How long the phase ran in the last run (absent when it did not run).",
    "machine_agent_phase_attempts":
        "Attempts of the phase for its current inputs, retries and runs together.",
    "machine_agent_phase_outcome":
        "1 for the phase condition's status and reason after the last run.",
}


class MetricsTextfile:
    """A Reporter: on the final report, the run's metrics into `path`."""

    def __init__(self, host: Host, journal: Journal, phase_of: dict[str, str],
                 path: str) -> None:
        self.host = host
        self.journal = journal
        self.phase_of = phase_of
        """Condition type → phase name, for the phases of this run."""
        self.path = path

    def publish(self, conditions: list[Condition], final: bool) -> None:
        if not final or not self.host.exists(posixpath.dirname(self.path)):
            return
        text = render(conditions, self.phase_of, read_status_document(self.host),
                      {name: rec.attempts for name, rec in self.journal.phases.items()})
        self.host.write_file(self.path, text, mode=0o644)


def render(conditions: list[Condition], phase_of: dict[str, str],
           status: dict[str, Any] | None, attempts: dict[str, int]) -> str:
    """The textfile (exposition format 0.0.4) for these conditions and timeline."""
    samples: dict[str, list[str]] = {name: [] for name in _HELP}
    summary = next((c for c in conditions if c.type == SUMMARY), None)
    samples["machine_agent_bootstrapped"].append(
        f"machine_agent_bootstrapped {int(summary is not None and summary.status == 'True')}")
    spans = _phase_seconds(status)
    if status and status.get("finishedAt"):
        end = _time(status["finishedAt"])
        samples["machine_agent_last_run_timestamp_seconds"].append(
            f"machine_agent_last_run_timestamp_seconds {end.timestamp():.3f}")
        if status.get("startedAt"):
            took = (end - _time(status["startedAt"])).total_seconds()
            samples["machine_agent_run_duration_seconds"].append(
                f"machine_agent_run_duration_seconds {took:.3f}")
    for cond in conditions:
        phase = phase_of.get(cond.type)
        if phase is None:
            continue
        labels = f'phase="{_label(phase)}"'
        if cond.type in spans:
            samples["machine_agent_phase_duration_seconds"].append(
                f"machine_agent_phase_duration_seconds{{{labels}}} {spans[cond.type]:.3f}")
        if phase in attempts:
            samples["machine_agent_phase_attempts"].append(
                f"machine_agent_phase_attempts{{{labels}}} {attempts[phase]}")
        samples["machine_agent_phase_outcome"].append(
            f'machine_agent_phase_outcome{{{labels},condition="{_label(cond.type)}",'
            f'status="{_label(cond.status)}",reason="{_label(cond.reason)}"}} 1')
    lines: list[str] = []
    for name, help_text in _HELP.items():
        if samples[name]:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", *samples[name]]
    return "\n".join(lines) + "\n"


def _phase_seconds(status: dict[str, Any] | None) -> dict[str, float]:
    """Per condition type: from its first report of work in this run to its True/False."""
    started: dict[str, datetime] = {}
    seconds: dict[str, float] = {}
    for event in (status or {}).get("events", []):
        kind, at = event.get("type"), event.get("at")
        if not kind or not at:
            continue
        if event.get("status") == "Unknown" and event.get("reason") != "Pending":
            started.setdefault(kind, _time(at))
        elif event.get("status") in ("True", "False") and kind in started:
            seconds[kind] = (_time(at) - started[kind]).total_seconds()
    return seconds


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _label(value: str) -> str:
    """A label value as the exposition format escapes it (also no line can be split)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
