"""The time phase: NTP configuration and the time gate before join."""

from agent.phases.time.phase import TimePhase

__all__ = ["TimePhase"]
