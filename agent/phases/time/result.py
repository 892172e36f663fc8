"""What the time phase proved, journaled for join's gate, `status` and the condition."""

from __future__ import annotations

from dataclasses import field

from agent.phases.base import PhaseResult
from agent.phases.facts import ClockChecked, Fact
from agent.phases.time.ntpcheck import ServerCheck
from agent.recordtype import record


@record
class ChronySource:
    name: str = ""
    state: str = ""
    reach: str = ""
    """chronyd's reach register, octal."""


@record
class TimeResult(PhaseResult):
    gated: bool = True
    """False with no servers configured: the image's time is left alone, join not gated."""
    synchronised: bool = False
    offset: float | None = None
    stratum: int | None = None
    reference: str = ""
    max_offset: float = 0.0
    waited: float = 0.0
    servers: list[ServerCheck] = field(default_factory=list)
    chrony_sources: list[ChronySource] = field(default_factory=list)
    warning: str | None = None
    """Why the clock is not synchronised, when spec.time.onTimeout is warn."""

    def facts(self) -> list[Fact]:
        return [ClockChecked(self.synchronised, self.gated)]
