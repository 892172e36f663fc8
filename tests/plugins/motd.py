"""A phase from another package: it writes a message of the day. It is registered only
through the entry point group machine_agent.phases (tests/unit/test_phase_registry.py
installs it as a distribution would be) and runs after the time phase."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agent.config.fields import setting
from agent.errors import PermanentError
from agent.phases.base import PhaseContext, PhaseOf, PhasePlan, PhaseResult, file_change
from agent.phases.checks import Check, Doctor

MOTD = "/etc/motd.d/50-machine-agent"


def _one_line(value: str) -> str | None:
    return "must be one line" if any(c in value for c in "\r\n\x00") else None


@dataclass(frozen=True)
class MotdSettings:
    message: str = setting("The line shown at login.", default="managed by machine-agent",
                           check=_one_line)


@dataclass
class MotdResult(PhaseResult):
    path: str = ""


class MotdPhase(PhaseOf[MotdResult]):
    name = "motd"
    condition = "MotdWritten"
    after = "time"
    Settings = MotdSettings
    Result = MotdResult

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        plan = PhasePlan(self.name)
        change = file_change(ctx.host, MOTD, self._text(ctx))
        if change is not None:
            plan.changes.append(change)
        return plan

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> MotdResult:
        if ctx.host.read_text(MOTD) != self._text(ctx):
            raise PermanentError(f"{MOTD} does not hold the message")
        return MotdResult(path=MOTD)

    def message(self, result: MotdResult) -> str:
        return f"message of the day in {result.path}"

    def doctor_checks(self, doctor: Doctor) -> Iterator[Check]:
        if doctor.config is None:
            return
        text = doctor.host.read_text(MOTD)
        if text == self._text_of(doctor.config):
            yield Check(self.name, "file", "pass", f"{MOTD} holds the message")
        else:
            yield Check(self.name, "file", "fail", f"{MOTD} is missing or differs",
                        "run `machine-agent run --only motd`")

    def _text(self, ctx: PhaseContext) -> str:
        return self._text_of(ctx.config)

    def _text_of(self, config: Any) -> str:
        settings: MotdSettings = self.section(config)
        return settings.message + "\n"


class QuietPhase(PhaseOf[PhaseResult]):
    """A phase with no settings and nothing to change, after every built-in one."""

    name = "quiet"
    condition = "QuietDone"
