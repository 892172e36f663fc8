"""The time phase. Empty for now: it plans no changes; its issue fills it in."""

from __future__ import annotations

from agent.errors import Reason
from agent.phases.base import Phase


class TimePhase(Phase):
    name = "time"
    condition = "TimeSynchronized"
    success = Reason.TimeSynchronized
