"""The network: interfaces present and matching the config, addresses, routes and files
as planned (the network phase's own plan being empty), gateways answering, no other host
answering for the node's addresses, the management endpoint accepting connections.

Probes go on the wire (an ARP probe from 0.0.0.0, a datagram to a gateway's discard
port, a TCP connect): they change nothing on the node."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

from agent.errors import AgentError, Reason
from agent.netlink.observe import observe
from agent.netlink.probe import arp_conflicts
from agent.netlink.rtnl import connect
from agent.phases.base import Phase
from agent.phases.checks import Check, Doctor, Status, from_last_run, not_checked
from agent.phases.network.claims import held_allocations
from agent.phases.network.live import is_live
from agent.phases.network.match import resolve_names
from agent.phases.network.model import build_plan
from agent.phases.network.verify import (
    gateway_resolves,
    management_accepts,
    management_endpoint,
)

PHASE = "network"
RUN = "run `machine-agent run --only network`"
PROBE_TIMEOUT = 3.0
"""Seconds doctor waits for a gateway or the management endpoint at most."""


def checks(phase: Phase, doctor: Doctor) -> Iterator[Check]:
    """`phase` is the network phase, given by it: its plan is compared with the node."""
    config = doctor.config
    if config is None:
        return
    spec = config.spec.network
    record = doctor.journal.phases.get(PHASE) if doctor.journal else None
    applied = record is not None and record.state == "completed"
    # Before the phase has run, differences are expected: say so without failing.
    missing: Status = "fail" if applied else "warn"
    not_yet = "" if applied else " (the network phase has not completed yet)"
    host = doctor.host
    netplan = build_plan(spec, held_allocations(doctor.phase_context(), spec))
    live = bool(spec.interfaces) and is_live(host)
    if not spec.interfaces:
        yield Check(PHASE, "interfaces", "pass", "no interfaces in spec.network: the "
                    "image's own network configuration is left alone")
    elif not live:
        yield Check(PHASE, "interfaces", "warn", "not checked live: the root is not / and "
                    "no network namespace is named (only the files are compared)", "")
    names: dict[str, str] = {}
    if live:
        with contextlib.closing(connect(host)) as rtnl:
            now = observe(rtnl)
        for link in netplan.links:
            try:
                found = resolve_names(host, dataclasses.replace(netplan, links=(link,)),
                                      now)[link.name]
            except AgentError as err:
                yield Check(PHASE, f"interface:{link.name}", "fail", err.message,
                            err.hint or "")
                continue
            state = now.link(found)
            if link.virtual and state is None:
                yield Check(PHASE, f"interface:{link.name}", missing,
                            f"{link.kind} {link.name} does not exist{not_yet}", RUN)
                continue
            names[link.name] = found
            shown = f"{found} ({state.mac}, {'up' if state.up else 'down'})" if state else found
            yield Check(PHASE, f"interface:{link.name}", "pass", f"matches {shown}")
    if live and len(names) < len(netplan.links):
        yield not_checked(PHASE, "plan", "an interface does not match")
    else:
        yield _plan(phase, doctor, missing, not_yet)
    if not live:
        return
    clock, timeout = host.clock, min(float(spec.verify.timeout), PROBE_TIMEOUT)
    candidates = []
    with contextlib.closing(connect(host)) as rtnl:
        now = observe(rtnl, routes=False)
        for link in netplan.links:
            kernel = names.get(link.name)
            state = now.link(kernel) if kernel else None
            candidates += [(kernel, state.mac, str(a.ip)) for a in link.addresses
                           if kernel and state and a.version == 4
                           and str(a) in now.addresses_of(kernel)]
        for via, gateway in netplan.gateways:
            ok = gateway_resolves(host, rtnl, gateway, timeout, clock.monotonic, clock.sleep)
            # After a rollback the link has no address to ask from: the last run's
            # probe is the evidence.
            if not ok and (last := doctor.last_failure(PHASE, Reason.GatewayUnreachable)):
                yield from_last_run(PHASE, f"gateway:{gateway}", last,
                                    f"{gateway} on {via} did not answer within {timeout:g}s")
                continue
            yield Check(PHASE, f"gateway:{gateway}", "pass" if ok else missing,
                        f"{gateway} on {via} " + ("answers neighbour resolution" if ok else
                                                   f"did not answer within {timeout:g}s"
                                                   + not_yet),
                        "" if ok else "check the gateway address, VLAN and cabling")
    conflict = doctor.last_failure(PHASE, Reason.AddressConflict)
    if not candidates and conflict is not None:
        # The address was never configured (the probe found it taken), and a probe now
        # needs the link up: the last run's probe is the evidence.
        yield from_last_run(PHASE, "address-conflict", conflict,
                            "the node's addresses are not configured on their links")
    if candidates:
        try:
            taken = arp_conflicts(host, candidates, spec.conflict_detection, clock.monotonic)
        except OSError as err:
            yield Check(PHASE, "address-conflict", "warn",
                        f"ARP probe not sent: {err.strerror or err}", "")
        else:
            shown = ", ".join(sorted(ip for _, _, ip in candidates))
            yield (Check(PHASE, "address-conflict", "fail",
                         f"another host answers for {', '.join(sorted(taken))}",
                         "free the address or fix the IPAM record")
                   if taken else Check(PHASE, "address-conflict", "pass",
                                       f"no other host answers for {shown} (ARP probe)"))
    endpoint = management_endpoint(config)
    if endpoint is not None:
        try:
            reached = management_accepts(host, endpoint, timeout, clock.monotonic,
                                         clock.sleep)
        except AgentError as err:
            yield Check(PHASE, "management-endpoint", "fail", err.message,
                        "check the route and firewall to the management endpoint")
        else:
            yield Check(PHASE, "management-endpoint", "pass",
                        f"{reached} port {endpoint[1]} accepts TCP from the node")


def _plan(phase: Phase, doctor: Doctor, missing: Status, not_yet: str) -> Check:
    """What `machine-agent plan` would change: nothing, on a node as configured."""
    try:
        plan = phase.plan(doctor.phase_context())
    except AgentError as err:
        return Check(PHASE, "plan", "fail", f"cannot plan: {err.message}", err.hint or "")
    if not plan.changes:
        return Check(PHASE, "plan", "pass", "links, addresses, routes and files as planned")
    shown = "; ".join(c.summary for c in plan.changes)
    return Check(PHASE, "plan", missing, f"{len(plan.changes)} difference(s){not_yet}: "
                 f"{shown}", RUN, {"changes": [c.summary for c in plan.changes]})
