"""The one place the network phase asks IPAM plugins for addresses.

A plugin is opened by the name in the configuration (`open_plugin`: entry point, its own
settings from spec.ipam.plugins.<name>) with what it may use: the Host, the Machine and
the management-cluster client. The claim key is Machine UID + interface + family, so a
retry or a reboot gets the same address back. Every allocation is recorded in the
journal as soon as it is made, for `machine-agent reset`.
"""

from __future__ import annotations

from agent.config.network import NetworkSpec
from agent.errors import PermanentError, Reason
from agent.ipam import ledger
from agent.ipam.base import (
    Allocation,
    ClaimRequest,
    IPAMPlugin,
    PluginEnv,
    open_plugin,
    validate_allocation,
)
from agent.kube.claims import claim_key
from agent.phases.base import PhaseContext
from agent.phases.network.model import PlannedClaim, ipam_refs


def machine_uid(ctx: PhaseContext) -> str:
    """The Machine's UID; without a Machine, this host's /etc/machine-id."""
    if ctx.machine is not None:
        return ctx.machine.uid
    machine_id = (ctx.host.read_text("/etc/machine-id") or "").strip()
    if not machine_id:
        raise PermanentError(
            "cannot claim IPAM addresses: no Machine was read and /etc/machine-id is empty",
            reason=Reason.MachineNotFound,
            hint="configure spec.identity and the management cluster, or give the image a "
                 "machine-id (systemd-machine-id-setup)")
    return machine_id


def plugin_env(ctx: PhaseContext) -> PluginEnv:
    return PluginEnv(ctx.host, ctx.machine, ctx.management)


def claim_requests(ctx: PhaseContext, spec: NetworkSpec) -> list[tuple[PlannedClaim,
                                                                        ClaimRequest]]:
    """The claim of every `ipam:` address, as the plugins are asked for it (also what
    `doctor` looks up, read-only)."""
    refs = ipam_refs(spec)
    if not refs:
        return []
    uid = machine_uid(ctx)
    return [(ref, ClaimRequest(
        claim_key=claim_key(uid, ref.interface, ref.ref.family), pool=ref.ref.pool,
        family=ref.ref.family, interface=ref.interface,
        machine_namespace=ctx.machine.namespace if ctx.machine else "",
        machine_name=ctx.machine.name if ctx.machine else "",
        hostname=spec.hostname or "")) for ref in refs]


def held_allocations(ctx: PhaseContext,
                     spec: NetworkSpec) -> dict[tuple[str, int], Allocation]:
    """The addresses this node already holds for its claims, from the journal's ledger
    (no plugin is asked): what `plan` compares the host against. Empty when the claim
    keys cannot be formed (no Machine, no machine-id): the claims are then pending."""
    held = {h.claim_key: h.allocation for h in ledger.held(ctx.journal)}
    if not held:
        return {}
    try:
        requests = claim_requests(ctx, spec)
    except PermanentError:
        return {}
    return {(ref.interface, ref.index): held[request.claim_key]
            for ref, request in requests if request.claim_key in held}


def plugin(ctx: PhaseContext, name: str) -> IPAMPlugin:
    """The IPAM plugin `name`, opened with its settings for this node."""
    return open_plugin(name, ctx.config.spec.ipam.plugins, plugin_env(ctx))


def claim_addresses(ctx: PhaseContext, spec: NetworkSpec) -> dict[tuple[str, int], Allocation]:
    """Claim every `ipam:` address; keyed by (interface, index in its addresses)."""
    plugins: dict[str, IPAMPlugin] = {}
    out: dict[tuple[str, int], Allocation] = {}
    for ref, request in claim_requests(ctx, spec):
        name = ref.ref.plugin
        if name not in plugins:
            plugins[name] = plugin(ctx, name)
        ctx.progress(f"claiming an {ref.ref.family} address for {ref.interface} from "
                     f"{name} pool {ref.ref.pool!r}")
        alloc = validate_allocation(plugins[name].claim(request), request)
        ledger.record(ctx.journal, name, request, alloc)
        ctx.log.info("claimed %s/%s for %s from %s pool %r", alloc.address, alloc.prefix,
                     ref.interface, name, ref.ref.pool)
        out[(ref.interface, ref.index)] = alloc
    return out
