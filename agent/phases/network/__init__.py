"""The network phase: Interfaces, addresses, routes, DNS and host name."""

from agent.phases.network.phase import NetworkPhase

__all__ = ["NetworkPhase"]
