"""The `--fault` catalogue: failures as a user meets them, each arranged in a running
sandbox before the agent starts, each with the condition and reason it must end with on
the Machine, and what the node must look like afterwards (nothing half-applied)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.errors import PermanentError, Reason
from machine_agent_sandbox.cluster import IPAM, POOL, take_address
from machine_agent_sandbox.netns import GATEWAY, static_address

if TYPE_CHECKING:
    from machine_agent_sandbox.sandbox import Sandbox

STALE_CLAIM = "decommissioned-worker"


@dataclass(frozen=True)
class Fault:
    name: str
    story: str
    """What happens, in the user's words."""
    condition: str
    """The Machine condition that must carry the reason."""
    reason: Reason
    arrange: Callable[[Sandbox], None]
    address_kept: bool
    """Whether the node keeps its data address (the network phase itself succeeded)."""
    needs_ipam: bool = False


def _pool_exhausted(box: Sandbox) -> None:
    """The pool holds one address, and another Machine's claim already has it."""
    box.admin.call("PATCH", f"/apis/{IPAM}/v1alpha2/namespaces/{box.admin.ns}/"
                   f"inclusterippools/{POOL}", {"spec": {"addresses": [
                       static_address(0).split("/")[0]]}},
                   content_type="application/merge-patch+json")
    take_address(box.admin, STALE_CLAIM)
    deadline = time.monotonic() + 10
    while not any(c["metadata"]["name"] == STALE_CLAIM and c.get("status", {}).get(
            "addressRef") for c in box.admin.claims()):
        if time.monotonic() > deadline:
            raise PermanentError("the pool controller did not fulfil the stale claim")
        time.sleep(0.05)


def _ntp_down(box: Sandbox) -> None:
    box.stop_ntp()


def _token_expired(box: Sandbox) -> None:
    """The workload cluster knows only a newer token: the bootstrap data's one expired
    (CABPK's default TTL is 15 minutes) and was deleted."""
    for node in box.nodes:
        node.workload["tokens"] = {"ghijkl": "0123456789ghijkl"}
        node.save_world()


def _gateway_down(box: Sandbox) -> None:
    box.network.gateway_down()


def _address_in_use(box: Sandbox) -> None:
    """Another host on the segment already answers for the node's address."""
    box.network.router_ip("addr", "add", static_address(0), "dev", "br-data")


def _ca_mismatch(box: Sandbox) -> None:
    for node in box.nodes:
        node.workload["caCertHash"] = "sha256:" + "ab" * 32
        node.save_world()


def _node_name_taken(box: Sandbox) -> None:
    for node in box.nodes:
        node.workload["readyNodes"] = [node.name]
        node.save_world()


CATALOGUE = {f.name: f for f in (
    Fault("pool-exhausted", "the IPAM pool has no free address left", "NetworkReady",
          Reason.PoolExhausted, _pool_exhausted, address_kept=False, needs_ipam=True),
    Fault("gateway-down", f"the gateway {GATEWAY} does not answer", "NetworkReady",
          Reason.GatewayUnreachable, _gateway_down, address_kept=False),
    Fault("address-in-use", f"another host already uses {static_address(0)}",
          "NetworkReady", Reason.AddressConflict, _address_in_use, address_kept=False),
    Fault("ntp-down", "the NTP server does not answer", "TimeSynchronized",
          Reason.TimeNotSynchronized, _ntp_down, address_kept=True),
    Fault("token-expired", "the bootstrap token in the bootstrap data has expired",
          "NodeJoined", Reason.TokenExpired, _token_expired, address_kept=True),
    Fault("ca-mismatch", "the workload cluster's CA is not the one the bootstrap data "
          "pins", "NodeJoined", Reason.CACertHashMismatch, _ca_mismatch, address_kept=True),
    Fault("node-name-taken", "a Node with this name is already in the workload cluster",
          "NodeJoined", Reason.NodeNameConflict, _node_name_taken, address_kept=True),
)}
