"""The doctor's areas by name, in the order they run: its own, and one per phase (from
the phase registry, passed in). Imports nothing, for `--help`."""

from __future__ import annotations

from collections.abc import Iterable

BEFORE_PHASES = ("config", "management", "ipam")
"""What the phases' checks use: the configuration, the Machine, the IPAM claims."""
AFTER_PHASES = ("journal",)
"""What the runs left behind: the journal, the conditions, undelivered reports."""


def area_names(phases: Iterable[str]) -> tuple[str, ...]:
    return (*BEFORE_PHASES, *phases, *AFTER_PHASES)
