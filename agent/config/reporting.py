"""`spec.reporting`: where the agent tells the world how it is doing."""

from __future__ import annotations

from agent.config import checks
from agent.config.fields import setting
from agent.recordtype import record


@record(frozen=True)
class ReportingSpec:
    conditions: bool = setting("Write conditions onto the Machine's status.", default=True)
    events: bool = setting("Record Events on phase transitions.", default=True)
    sentinel: bool = setting(
        "Write CABPK's /run/cluster-api/bootstrap-success.complete on success.", default=True)
    metrics_textfile: str | None = setting(
        "Where the run's metrics (machine_agent_*: phase durations, outcome, attempts) are "
        "written after each run, for node_exporter's textfile collector; only where the "
        "directory exists. null: never.",
        default="/var/lib/prometheus/node-exporter/machine-agent.prom",
        check=checks.absolute_path)
