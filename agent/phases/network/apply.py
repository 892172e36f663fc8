"""The difference between what the namespace holds and what is wanted, as netlink
operations, and their execution through the Host's netlink handle (one recorded effect
per change). The same differ rolls back: the wanted state is then the snapshot."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agent.errors import PermanentError, Reason
from agent.phases.network.model import DEFAULT_METRIC, RT_TABLE_MAIN, NetworkPlan, RoutePlan
from agent.phases.network.observe import Observed, RouteState

if TYPE_CHECKING:
    from pyroute2 import IPRoute

    from agent.host import Host

RTPROT_STATIC = 4
RT_SCOPE_UNIVERSE, RT_SCOPE_LINK = 0, 253
IFA_F_NODAD = 0x02
KERNEL_MODULE = {"vlan": "8021q", "bond": "bonding", "bridge": "bridge", "macvlan": "macvlan"}
EOPNOTSUPP = 95


@dataclass(frozen=True)
class NetOp:
    """One netlink change: `what` on link `link` with `params`."""

    what: Literal["link-add", "link-set", "link-del", "addr-add", "addr-del",
                  "route-add", "route-del"]
    link: str
    params: tuple[tuple[str, Any], ...] = ()
    summary: str = ""

    def __str__(self) -> str:
        return self.summary


@dataclass
class Diff:
    """The forward change in the order it must run: links; then stale routes and
    addresses out and new addresses in; then new routes (a next hop needs its prefix)."""

    links: list[NetOp] = field(default_factory=list)
    addresses: list[NetOp] = field(default_factory=list)
    routes: list[NetOp] = field(default_factory=list)

    @property
    def ops(self) -> list[NetOp]:
        return [*self.links, *self.addresses, *self.routes]

    def new_ipv4(self) -> list[tuple[str, str]]:
        """(link, address) of every IPv4 address to be added: what the ARP probe checks."""
        return [(op.link, dict(op.params)["address"]) for op in self.addresses
                if op.what == "addr-add" and ":" not in dict(op.params)["address"]]


def _addr_op(what: Literal["addr-add", "addr-del"], link: str, iface: str,
             nodad: bool = False) -> NetOp:
    ip = ipaddress.ip_interface(iface)
    params: list[tuple[str, Any]] = [("address", str(ip.ip)), ("prefixlen", ip.network.prefixlen)]
    if nodad and ip.version == 6:
        params.append(("flags", IFA_F_NODAD))
    verb = "add" if what == "addr-add" else "remove"
    return NetOp(what, link, tuple(params), f"{verb} address {iface} on {link}")


def nodad(op: NetOp) -> NetOp:
    """The same change, adding an IPv6 address without duplicate address detection."""
    params = dict(op.params)
    if op.what != "addr-add" or ":" not in params["address"]:
        return op
    return _addr_op("addr-add", op.link, f"{params['address']}/{params['prefixlen']}",
                    nodad=True)


def _route_op(what: Literal["route-add", "route-del"], link: str, dst: str, via: str | None,
              table: int, metric: int, proto: int = RTPROT_STATIC,
              scope: int | None = None) -> NetOp:
    net = ipaddress.ip_network(dst)
    params: list[tuple[str, Any]] = [
        ("family", socket.AF_INET if net.version == 4 else socket.AF_INET6),
        ("dst_len", net.prefixlen), ("table", table), ("priority", metric), ("proto", proto),
        ("scope", scope if scope is not None else
         RT_SCOPE_UNIVERSE if via else RT_SCOPE_LINK)]
    if net.prefixlen:
        params.append(("dst", str(net.network_address)))
    if via:
        params.append(("gateway", via))
    verb = "add" if what == "route-add" else "remove"
    shown = "default" if not net.prefixlen else dst
    extra = (f" via {via}" if via else "") + (f" table {table}" if table != RT_TABLE_MAIN
                                              else "") + f" metric {metric}"
    return NetOp(what, link, tuple(params), f"{verb} route {shown}{extra} on {link}")


def forward(plan: NetworkPlan, now: Observed, names: dict[str, str]) -> Diff:
    """What turns `now` into `plan`: only the difference, so a configured host gives none."""
    diff = Diff()
    for link in plan.links:  # every link exists before any is enslaved to another
        state = now.link(names[link.name])
        if link.virtual and state is None:
            diff.links.append(_create(link.name, plan, names))
        elif link.virtual and state is not None and state.kind != link.kind:
            raise PermanentError(
                f"{link.name} exists as a {state.kind or 'physical'} link, not a {link.kind}",
                reason=Reason.InterfaceNotFound,
                hint=f"delete {link.name} or rename the interface entry")
    for link in plan.links:
        name = names[link.name]
        state = now.link(name)
        master = names[link.master] if link.master else None
        if (state is None or now.name_of(state.master) != master) and master is not None:
            if plan.link(link.master or "").kind == "bond" and (state is None or state.up):
                diff.links.append(NetOp("link-set", name, (("state", "down"),),
                                        f"set {name} down to enslave it"))
            diff.links.append(NetOp("link-set", name, (("master", master),),
                                    f"attach {name} to {master}"))
        if link.mtu is not None and (state is None or state.mtu != link.mtu):
            diff.links.append(NetOp("link-set", name, (("mtu", link.mtu),),
                                    f"set MTU {link.mtu} on {name}"))
        if state is None or not state.up or _going_down(diff, name):
            diff.links.append(NetOp("link-set", name, (("state", "up"),), f"set {name} up"))
        have = now.addresses_of(name) if state else set()
        want = {str(a) for a in link.addresses}
        families = link.managed_families
        for a in sorted(have - want):
            if ipaddress.ip_interface(a).version in families:
                diff.addresses.append(_addr_op("addr-del", name, a))
        for a in [str(a) for a in link.addresses if str(a) not in have]:
            diff.addresses.append(_addr_op("addr-add", name, a))
        have_routes = {r.key: r for r in now.routes_of(name)} if state else {}
        want_routes = {r.key: r for r in link.routes}
        for key, r in sorted(have_routes.items(), key=lambda kv: str(kv[0])):
            if key not in want_routes and r.family in families and r.proto in (3, RTPROT_STATIC):
                # before the address changes: removing an address drops its routes
                diff.addresses.insert(0, _route_op("route-del", name, r.dst, r.via, r.table,
                                                   r.metric, r.proto, r.scope))
        for key, rp in want_routes.items():
            if key not in have_routes:
                diff.routes.append(_planned_route(name, rp))
    return diff


def _going_down(diff: Diff, name: str) -> bool:
    return any(op.link == name and op.params == (("state", "down"),) for op in diff.links)


def _planned_route(name: str, r: RoutePlan) -> NetOp:
    return _route_op("route-add", name, r.dst, r.via, r.table or RT_TABLE_MAIN,
                     r.metric if r.metric is not None else DEFAULT_METRIC[r.family])


def _create(name: str, plan: NetworkPlan, names: dict[str, str]) -> NetOp:
    link = plan.link(name)
    params: list[tuple[str, Any]] = [("kind", link.kind)]
    if link.parent is not None:
        params.append(("parent", names[link.parent]))
    if link.kind == "vlan":
        params.append(("vlan_id", link.vlan_id))
    elif link.kind == "macvlan":
        params.append(("macvlan_mode", link.macvlan_mode))
    elif link.kind == "bridge":
        params.append(("br_stp_state", 1 if link.stp else 0))
    elif link.kind == "bond" and link.bond is not None:
        params += [("bond_mode", link.bond.mode), ("bond_miimon", link.bond.miimon)]
    return NetOp("link-add", name, tuple(params), f"create {link.kind} {name}")


def rollback(snapshot: Observed, now: Observed, names: Iterable[str]) -> list[NetOp]:
    """What returns the links `names` to `snapshot`: links the change created are
    deleted, and master, MTU, state, addresses and routes are put back as they were.
    Run it again after executing until it is empty (the kernel drops routes whose next
    hop went away with an address)."""
    ops: list[NetOp] = []

    def riders_first(name: str) -> tuple[bool, str]:
        state = now.link(name)
        return (state is None or state.kind not in ("vlan", "macvlan"), name)

    for name in sorted(names, key=riders_first):
        was, state = snapshot.link(name), now.link(name)
        if state is None:
            continue
        if was is None:
            ops.append(NetOp("link-del", name, (), f"delete {name}, created by the change"))
            continue
        master = snapshot.name_of(was.master)
        if now.name_of(state.master) != master:
            ops.append(NetOp("link-set", name, (("master", master),),
                             f"restore master of {name} ({master or 'none'})"))
        if state.mtu != was.mtu:
            ops.append(NetOp("link-set", name, (("mtu", was.mtu),),
                             f"restore MTU {was.mtu} on {name}"))
        if state.up != was.up:
            ops.append(NetOp("link-set", name, (("state", "up" if was.up else "down"),),
                             f"restore {name} {'up' if was.up else 'down'}"))
        have, had = now.addresses_of(name), snapshot.addresses_of(name)
        ops += [_addr_op("addr-del", name, a) for a in sorted(have - had)]
        ops += [_addr_op("addr-add", name, a, nodad=True) for a in sorted(had - have)]
        ops += _route_rollback(name, now.routes_of(name), snapshot.routes_of(name))
    return ops


def _route_rollback(name: str, have: set[RouteState], had: set[RouteState]) -> list[NetOp]:
    def ident(r: RouteState) -> tuple[Any, ...]:
        return (*r.key, r.proto, r.scope)

    have_k, had_k = {ident(r): r for r in have}, {ident(r): r for r in had}
    ops = [_route_op("route-del", name, r.dst, r.via, r.table, r.metric, r.proto, r.scope)
           for k, r in sorted(have_k.items(), key=lambda kv: str(kv[0])) if k not in had_k]
    ops += [_route_op("route-add", name, r.dst, r.via, r.table, r.metric, r.proto, r.scope)
            for k, r in sorted(had_k.items(), key=lambda kv: str(kv[0])) if k not in have_k]
    return ops


class Executor:
    """Runs NetOps on one netlink handle, recording each as a side effect of the Host."""

    def __init__(self, host: Host, ipr: IPRoute) -> None:
        self.host = host
        self.ipr = ipr
        self.index: dict[str, int] = {}
        self.count = 0

    def index_of(self, name: str) -> int:
        if name not in self.index:
            self.index = {m.get("IFLA_IFNAME"): m["index"] for m in self.ipr.get_links()}
        if name not in self.index:
            raise PermanentError(f"link {name} disappeared while it was being configured",
                                 reason=Reason.InterfaceNotFound)
        return self.index[name]

    def run(self, ops: Iterable[NetOp], *, tolerant: bool = False) -> None:
        """Run `ops` in order. `tolerant` (rollback): an op whose target is already
        gone or already there is not an error."""
        from pyroute2 import NetlinkError

        for op in ops:
            self.host.record_effect(f"netlink: {op.summary}")
            try:
                self._one(op)
            except NetlinkError as err:
                # a removal whose target the kernel already dropped (ENOENT, ESRCH, ENODEV,
                # EADDRNOTAVAIL) reached its goal; a rollback also accepts EEXIST
                gone = op.what.endswith("-del") and err.code in (2, 3, 19, 99)
                if gone or (tolerant and err.code == 17):
                    continue
                kind = dict(op.params).get("kind")
                if op.what == "link-add" and err.code == EOPNOTSUPP and kind in KERNEL_MODULE:
                    raise PermanentError(
                        f"cannot create {kind} {op.link}: the kernel has no "
                        f"{KERNEL_MODULE[kind]} support (module {KERNEL_MODULE[kind]})",
                        reason=Reason.KernelFeatureMissing,
                        hint=f"use an image whose kernel has the {KERNEL_MODULE[kind]} "
                             "module; the persistent configuration is unaffected") from err
                raise PermanentError(f"netlink refused to {op.summary}: {err}") from err
            self.count += 1

    def _one(self, op: NetOp) -> None:
        p = dict(op.params)
        if op.what == "link-add":
            kind = p.pop("kind")
            if "parent" in p:
                p["link"] = self.index_of(p.pop("parent"))
            self.ipr.link("add", ifname=op.link, kind=kind, **p)
            self.index.clear()
        elif op.what == "link-del":
            self.ipr.link("del", index=self.index_of(op.link))
            self.index.clear()
        elif op.what == "link-set":
            if "master" in p:
                p["master"] = self.index_of(p["master"]) if p["master"] else 0
            self.ipr.link("set", index=self.index_of(op.link), **p)
        elif op.what in ("addr-add", "addr-del"):
            self.ipr.addr("add" if op.what == "addr-add" else "del",
                          index=self.index_of(op.link), **p)
        else:
            self.ipr.route("add" if op.what == "route-add" else "del",
                           oif=self.index_of(op.link), **p)
