"""The network phase: Interfaces, addresses, routes, DNS and host name.

Exported for the doctor's IPAM area: the claims as the plugins are asked for them, and
a plugin opened with its settings."""

from agent.phases.network.claims import claim_requests
from agent.phases.network.claims import plugin as open_ipam_plugin
from agent.phases.network.phase import NetworkPhase

__all__ = ["NetworkPhase", "claim_requests", "open_ipam_plugin"]
