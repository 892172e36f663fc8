"""The phases, in the order they run. Each lives in its own package."""

from __future__ import annotations

from agent.phases.base import Phase


def all_phases() -> list[Phase]:
    """Every phase in pipeline order. Imported on demand to keep start-up light."""
    from agent.phases.cni import CNIPhase
    from agent.phases.join import JoinPhase
    from agent.phases.network import NetworkPhase
    from agent.phases.time import TimePhase

    return [NetworkPhase(), TimePhase(), JoinPhase(), CNIPhase()]
