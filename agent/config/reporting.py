"""`spec.reporting`: where the agent tells the world how it is doing."""

from __future__ import annotations

from dataclasses import dataclass

from agent.config.fields import setting


@dataclass(frozen=True)
class ReportingSpec:
    conditions: bool = setting("Write conditions onto the Machine's status.", default=True)
    events: bool = setting("Record Events on phase transitions.", default=True)
    sentinel: bool = setting(
        "Write CABPK's /run/cluster-api/bootstrap-success.complete on success.", default=True)
