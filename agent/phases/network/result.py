"""What the network phase proved, journaled for later phases, `status` and the condition."""

from __future__ import annotations

from dataclasses import field

from agent.phases.base import PhaseResult
from agent.phases.facts import Fact, NodeAddresses
from agent.recordtype import record


@record
class ClaimedAddress:
    """An address claimed from IPAM, as `status` shows it (the journal's IPAM ledger
    holds what `reset` releases)."""

    interface: str = ""
    address: str = ""
    """`address/prefix`."""
    gateway: str | None = None
    backend: str = ""
    handle: str = ""


@record
class NetworkResult(PhaseResult):
    live: bool = False
    """Whether the links were changed live (else: the files alone, an image tree)."""
    renderer: str = ""
    addresses: dict[str, list[str]] = field(default_factory=dict)
    """Interface → `address/prefix` as configured, claimed addresses included."""
    claimed: list[ClaimedAddress] = field(default_factory=list)
    netlink_changes: int | None = None
    """Netlink requests the live apply made (0: the links were already so)."""
    gateways: list[str] = field(default_factory=list)
    """Gateways that answered neighbour resolution."""
    management: str | None = None
    """`host:port` of the management endpoint that accepted a connection."""
    files: list[str] = field(default_factory=list)
    """What was written, as each change's summary."""

    def facts(self) -> list[Fact]:
        return [NodeAddresses(self.addresses)]
