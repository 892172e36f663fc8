"""IPAM: each plugin the configuration names loads and its backend answers, and each
claim is present.

The plugin interface (agent/ipam/base.py) has `claim` and `release` only; a claim is not
read-only, so doctor never calls it. A plugin that offers `lookup(ClaimRequest) ->
Allocation | None` (find the claim's address without creating one) is asked through it;
for one that does not, doctor says the claim was not checked.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agent.errors import AgentError, Reason
from agent.ipam.base import Allocation
from agent.phases.checks import Check, Doctor, from_last_run
from agent.phases.network import claim_requests, open_ipam_plugin

PHASE = "ipam"
REFUSED = (Reason.PoolExhausted, Reason.PoolNotFound, Reason.IPAMUnavailable,
           Reason.IPAMUnauthorized, Reason.InvalidAllocation)
"""The network phase's failures that an IPAM backend caused."""


def checks(doctor: Doctor) -> Iterator[Check]:
    if doctor.config is None:
        return
    ctx = doctor.phase_context()
    try:
        requests = claim_requests(ctx, doctor.config.spec.network)
    except AgentError as err:
        yield Check(PHASE, "claims", "fail", err.message, err.hint or "")
        return
    if not requests:
        return
    plugins: dict[str, Any] = {}
    for ref, request in requests:
        name = ref.ref.plugin
        if name not in plugins:
            try:
                plugins[name] = open_ipam_plugin(ctx, name)
            except AgentError as err:
                plugins[name] = None
                yield Check(PHASE, f"plugin:{name}", "fail", err.message, err.hint or "")
            else:
                yield Check(PHASE, f"plugin:{name}", "pass", f"plugin {name} loads")
        plugin = plugins[name]
        if plugin is None:
            continue
        check = f"claim:{ref.interface}/{ref.ref.family}"
        lookup = getattr(plugin, "lookup", None)
        refused = doctor.last_failure("network", *REFUSED)
        if lookup is None:
            why = (f"plugin {name} has no read-only lookup (agent/ipam/base.py defines claim "
                   "and release only)")
            yield (from_last_run(PHASE, check, refused, why) if refused else
                   Check(PHASE, check, "warn", f"not checked: {why}", ""))
            continue
        try:
            found: Allocation | None = lookup(request)
        except AgentError as err:
            yield Check(PHASE, check, "fail", f"{name} pool {ref.ref.pool!r}: {err.message}",
                        err.hint or "")
            continue
        if found is None and refused is not None:
            # A refused claim is deleted at once (nothing half-created), and the pool's
            # free addresses are not readable with the node's RBAC.
            yield from_last_run(PHASE, check, refused, f"no claim for {request.claim_key} "
                                f"in {name} pool {ref.ref.pool!r}")
            continue
        if found is None:
            yield Check(PHASE, check, "warn", f"no address claimed yet for {request.claim_key} "
                        f"in {name} pool {ref.ref.pool!r}",
                        "run `machine-agent run --only network` to claim it")
            continue
        yield Check(PHASE, check, "pass", f"{found.address}/{found.prefix} claimed in {name} "
                    f"pool {ref.ref.pool!r}", details={"address": found.address,
                                                      "prefix": found.prefix,
                                                      "gateway": found.gateway})
