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
from agent.netlink.linkinfo import bond_data, bridge_data, macvlan_data, new_link, vlan_data
from agent.netlink.observe import (
    IFA_ADDRESS,
    IFA_BROADCAST,
    IFA_LOCAL,
    IFF_UP,
    IFLA_IFNAME,
    IFLA_MASTER,
    IFLA_MTU,
    RTA_DST,
    RTA_GATEWAY,
    RTA_OIF,
    RTA_PRIORITY,
    RTA_TABLE,
    RTN_UNICAST,
    LinkState,
    Observed,
    RouteState,
    kernel_text,
    links,
)
from agent.netlink.rtnl import (
    IFADDRMSG,
    IFINFOMSG,
    NLM_F_CREATE,
    NLM_F_EXCL,
    RTM_DELADDR,
    RTM_DELLINK,
    RTM_DELROUTE,
    RTM_NEWADDR,
    RTM_NEWLINK,
    RTM_NEWROUTE,
    RTMSG,
    Request,
    Rtnl,
    RtnlError,
    attr,
    u32,
)
from agent.phases.network.hwaddr import machine_id, networkd_address
from agent.phases.network.model import DEFAULT_METRIC, RT_TABLE_MAIN, NetworkPlan, RoutePlan
from agent.phases.network.sysctls import restore as sysctls_restore
from agent.phases.network.sysctls import wanted as sysctls_wanted

if TYPE_CHECKING:
    from agent.host import Host

RTPROT_STATIC = 4
RT_SCOPE_UNIVERSE, RT_SCOPE_LINK = 0, 253
RTNH_F_ONLINK = 4
IFA_F_NODAD = 0x02
KERNEL_MODULE = {"vlan": "8021q", "bond": "bonding", "bridge": "bridge", "macvlan": "macvlan"}
EOPNOTSUPP = 95


@dataclass(frozen=True)
class NetOp:
    """One netlink change: `what` on link `link` with `params`."""

    what: Literal["link-add", "link-set", "link-del", "addr-add", "addr-del",
                  "route-add", "route-del", "sysctl"]
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
    # `iface` is canonical (the kernel's spelling, see kernel_text): splitting it
    # instead of parsing it again was a tenth of a large apply
    address, _, prefix = iface.partition("/")
    params: list[tuple[str, Any]] = [("address", address), ("prefixlen", int(prefix))]
    if nodad and ":" in address:
        params.append(("flags", IFA_F_NODAD))
    verb = "add" if what == "addr-add" else "remove"
    return NetOp(what, link, tuple(params), f"{verb} address {iface} on {link}")


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


def forward(plan: NetworkPlan, now: Observed, names: dict[str, str], *,
            dad: bool = True) -> Diff:
    """What turns `now` into `plan`: only the difference, so a configured host gives none.
    `names` are the kernel names of the planned links now; a link the plan renames is
    renamed first and known by its new name after. Without `dad`, IPv6 addresses are
    added without duplicate address detection."""
    diff = Diff()
    targets = {link.name: link.name if link.rename else names[link.name]
               for link in plan.links}
    sysctls: list[NetOp] = []
    ups: list[NetOp] = []
    for link in plan.links:  # every link exists before any is enslaved to another
        state = now.link(names[link.name])
        if link.virtual and state is None:
            # made before any rename: a parent or primary is named as it is now
            diff.links.append(_create(link.name, plan, names))
        elif link.virtual and state is not None and state.kind != link.kind:
            raise PermanentError(
                f"{link.name} exists as a {state.kind or 'physical'} link, not a {link.kind}",
                reason=Reason.InterfaceNotFound,
                hint=f"delete {link.name} or rename the interface entry")
    for link in plan.links:
        current, name = names[link.name], targets[link.name]
        state = now.link(current)
        renamed = state is not None and current != name
        if renamed and state is not None:
            if now.link(name) is not None:
                raise PermanentError(
                    f"cannot rename {current} to {name}: a link named {name} exists",
                    reason=Reason.InterfaceNotFound,
                    hint=f"delete or rename {name}, or give the entry another name")
            if state.up:  # the kernel renames a link only while it is down
                diff.links.append(NetOp("link-set", current, (("state", "down"),),
                                        f"set {current} down to rename it"))
            diff.links.append(NetOp("link-set", current, (("name", name),),
                                    f"rename {current} to {name}"))
        master = targets[link.master] if link.master else None
        if (state is None or now.name_of(state.master) != master) and master is not None:
            if plan.link(link.master or "").kind == "bond" and (
                    state is None or (state.up and not renamed)):
                diff.links.append(NetOp("link-set", name, (("state", "down"),),
                                        f"set {name} down to enslave it"))
            diff.links.append(NetOp("link-set", name, (("master", master),),
                                    f"attach {name} to {master}"))
        if link.mtu is not None and (state is None or state.mtu != link.mtu):
            diff.links.append(NetOp("link-set", name, (("mtu", link.mtu),),
                                    f"set MTU {link.mtu} on {name}"))
        sysctls += [_sysctl_op(name, key, value)
                    for key, value in sysctls_wanted(link, plan, state)]
        if state is None or not state.up or renamed or _going_down(diff, name):
            ups.append(NetOp("link-set", name, (("state", "up"),), f"set {name} up"))
        have = now.addresses_of(current) if state else set()
        want = [kernel_text(a) for a in link.addresses]
        families = link.managed_families
        for old in sorted(have.difference(want)):
            if ipaddress.ip_interface(old).version in families:
                diff.addresses.append(_addr_op("addr-del", name, old))
        for new in want:
            if new not in have:
                diff.addresses.append(_addr_op("addr-add", name, new, nodad=not dad))
        have_routes = {r.key: r for r in now.routes_of(current)} if state else {}
        want_routes = {r.key: r for r in link.routes}
        for key, r in sorted(have_routes.items(), key=lambda kv: str(kv[0])):
            if key not in want_routes and r.family in families and r.proto in (3, RTPROT_STATIC):
                # before the address changes: removing an address drops its routes
                diff.addresses.insert(0, _route_op("route-del", name, r.dst, r.via, r.table,
                                                   r.metric, r.proto, r.scope))
        for key, rp in want_routes.items():
            if key not in have_routes:
                diff.routes.append(_planned_route(name, rp))
    # accept_ra before a link goes up (no advertisement is taken in between), all in one
    # visit to the namespace
    diff.links += sysctls + ups
    return diff


def _sysctl_op(name: str, key: str, value: int) -> NetOp:
    return NetOp("sysctl", name, (("key", key), ("value", value)),
                 f"set {key} {value} on {name}")


def _going_down(diff: Diff, name: str) -> bool:
    return any(op.link == name and op.params == (("state", "down"),) for op in diff.links)


def _planned_route(name: str, r: RoutePlan) -> NetOp:
    op = _route_op("route-add", name, r.dst, r.via, r.table or RT_TABLE_MAIN,
                   r.metric if r.metric is not None else DEFAULT_METRIC[r.family])
    if r.on_link:
        return NetOp(op.what, op.link, (*op.params, ("flags", RTNH_F_ONLINK)),
                     op.summary + " (onlink)")
    return op


def _create(name: str, plan: NetworkPlan, names: dict[str, str]) -> NetOp:
    link = plan.link(name)
    params: list[tuple[str, Any]] = [("kind", link.kind)]
    if link.parent is not None:
        params.append(("parent", names[link.parent]))
    if link.kind == "vlan":
        params += [("vlan_id", link.vlan_id), ("vlan_protocol", link.vlan_protocol)]
    elif link.kind == "macvlan":
        params.append(("macvlan_mode", link.macvlan_mode))
    elif link.kind == "bridge":
        params += [("forward_delay", link.forward_delay), ("stp", link.stp)]
    elif link.kind == "bond" and link.bond is not None:
        bond = link.bond
        params += [("bond_mode", bond.mode), ("miimon", bond.miimon),
                   ("primary", names[bond.primary] if bond.primary else None),
                   ("lacp_rate", bond.lacp_rate),
                   ("xmit_hash_policy", bond.transmit_hash_policy)]
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
        if was is not None and state is None:
            renamed = now.at(was.index)
            if renamed is not None and renamed.name != name:
                if renamed.up:
                    ops.append(NetOp("link-set", renamed.name, (("state", "down"),),
                                     f"set {renamed.name} down to rename it back"))
                ops.append(NetOp("link-set", renamed.name, (("name", name),),
                                 f"rename {renamed.name} back to {name}"))
            continue
        if state is None:
            continue
        if was is None:
            if snapshot.at(state.index) is None:
                ops.append(NetOp("link-del", name, (), f"delete {name}, created by the change"))
            continue
        master = snapshot.name_of(was.master)
        if now.name_of(state.master) != master:
            ops.append(NetOp("link-set", name, (("master", master),),
                             f"restore master of {name} ({master or 'none'})"))
        if state.mtu != was.mtu:
            ops.append(NetOp("link-set", name, (("mtu", was.mtu),),
                             f"restore MTU {was.mtu} on {name}"))
        ops += [_sysctl_op(name, key, value) for key, value in sysctls_restore(was, state)]
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
    """Runs NetOps in the node's namespace, recording each as a side effect of the Host.

    Changes go to the kernel many to one send, their acks read after (`Rtnl.execute`):
    one round trip per change was most of the 2.7 s that 1,000 addresses took through
    pyroute2 (bench/README.md). Links are created on the same socket. The kernel runs
    every change of a send even when one before it is refused, so all that ran are
    counted and the first refused one is reported; the caller's rollback is computed
    from the state, not from the ops, so it undoes those too."""

    def __init__(self, host: Host, rtnl: Rtnl, known: Iterable[LinkState] = ()) -> None:
        self.host = host
        self.rtnl = rtnl
        # the links of a fresh observation spare a dump for their indexes
        self.index: dict[str, int] = {link.name: link.index for link in known}
        self.count = 0

    def index_of(self, name: str) -> int:
        if name not in self.index:
            self.index = {link.name: link.index for link in links(self.rtnl)}
        if name not in self.index:
            raise PermanentError(f"link {name} disappeared while it was being configured",
                                 reason=Reason.InterfaceNotFound)
        return self.index[name]

    def run(self, ops: Iterable[NetOp], *, tolerant: bool = False) -> None:
        """Run `ops` in order. `tolerant` (rollback): an op whose target is already
        gone or already there is not an error."""
        pending: list[NetOp] = []
        for op in ops:
            if pending and (op.what == "sysctl") != (pending[0].what == "sysctl"):
                self._flush(pending, tolerant)
                pending = []
            if op.what != "link-add" and not any(k == "name" for k, _ in op.params):
                pending.append(op)
                continue
            self._flush(pending, tolerant)
            pending = []
            # the changes after a new or renamed link name it: sent alone, and the index
            # cache is cleared
            self._send_one(op, self.request(op), tolerant)
            self.index.clear()
        self._flush(pending, tolerant)

    def _flush(self, ops: list[NetOp], tolerant: bool) -> None:
        """Netlink changes many to one send; sysctl writes in one visit to the node's
        namespace (a thread entering it per write: 12 ms for 100 links against 1 ms, a
        fifth of such an apply)."""
        if not ops or ops[0].what != "sysctl":
            self._send(ops, tolerant)
            return
        settings = [(op.link, str(dict(op.params)["key"]), int(dict(op.params)["value"]))
                    for op in ops]
        self.count += sum(self.host.set_ipv6_conf(settings))

    def _send(self, ops: list[NetOp], tolerant: bool) -> None:
        self.host.check_writable("netlink changes")
        requests = [self.request(op) for op in ops]
        refused: tuple[NetOp, RtnlError] | None = None
        for op, (code, detail) in zip(ops, self.rtnl.execute(requests), strict=True):
            if code == 0:
                # counted once made: the crash harness kills right after the Nth effect
                self.host.record_effect(f"netlink: {op.summary}")
                self.count += 1
            elif not _accepted(op, code, tolerant) and refused is None:
                refused = (op, RtnlError(code, detail))
        if any(op.what == "link-del" for op in ops):
            self.index.clear()
        if refused is not None:
            raise _refused(*refused) from refused[1]

    def _send_one(self, op: NetOp, request: Request, tolerant: bool) -> None:
        self.host.check_writable("netlink changes")
        ((code, detail),) = self.rtnl.execute([request])
        if code == 0:
            self.host.record_effect(f"netlink: {op.summary}")
            self.count += 1
        elif not _accepted(op, code, tolerant):
            raise _refused(op, RtnlError(code, detail))

    def _new_link(self, op: NetOp) -> Request:
        p = dict(op.params)
        kind = p["kind"]
        parent = self.index_of(p["parent"]) if p.get("parent") else None
        data = b""
        if kind == "bond":
            primary = p.get("primary")
            data = bond_data(p["bond_mode"], miimon=p.get("miimon"),
                             primary=self.index_of(primary) if primary else None,
                             lacp_rate=p.get("lacp_rate"),
                             xmit_hash_policy=p.get("xmit_hash_policy"))
        elif kind == "vlan":
            data = vlan_data(p["vlan_id"], p.get("vlan_protocol"))
        elif kind == "bridge":
            data = bridge_data(forward_delay=p.get("forward_delay"), stp=p.get("stp"))
        elif kind == "macvlan":
            data = macvlan_data(p["macvlan_mode"])
        address = (networkd_address(machine_id(self.host), op.link) if kind == "bridge"
                   else None)  # as networkd creates it: see hwaddr.py
        return new_link(op.link, kind, data, parent, address)

    def request(self, op: NetOp) -> Request:
        """The netlink message of `op` (link indexes looked up now)."""
        p = dict(op.params)
        if op.what == "link-add":
            return self._new_link(op)
        if op.what == "link-del":
            return Request(RTM_DELLINK, 0, IFINFOMSG.pack(0, 0, self.index_of(op.link), 0, 0))
        if op.what == "link-set":
            flags = change = 0
            nla = b""
            if "state" in p:
                change, flags = IFF_UP, IFF_UP if p["state"] == "up" else 0
            if "mtu" in p:
                nla += u32(IFLA_MTU, p["mtu"])
            if "master" in p:
                nla += u32(IFLA_MASTER, self.index_of(p["master"]) if p["master"] else 0)
            if "name" in p:
                nla += attr(IFLA_IFNAME, p["name"].encode() + b"\0")
            return Request(RTM_NEWLINK, 0,
                           IFINFOMSG.pack(0, 0, self.index_of(op.link), flags, change) + nla)
        if op.what in ("addr-add", "addr-del"):
            family = socket.AF_INET6 if ":" in p["address"] else socket.AF_INET
            packed = socket.inet_pton(family, p["address"])
            body = (IFADDRMSG.pack(family, p["prefixlen"], p.get("flags", 0),
                                   RT_SCOPE_UNIVERSE, self.index_of(op.link))
                    + attr(IFA_LOCAL, packed) + attr(IFA_ADDRESS, packed))
            if op.what == "addr-add" and family == socket.AF_INET and p["prefixlen"] <= 30:
                # the subnet's broadcast, as networkd and `ip addr add ... brd +` give it
                # (none on /31 and /32, which have no broadcast address)
                net = ipaddress.ip_network(f"{p['address']}/{p['prefixlen']}", strict=False)
                body += attr(IFA_BROADCAST, net.broadcast_address.packed)
            if op.what == "addr-add":
                return Request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, body)
            return Request(RTM_DELADDR, 0, body)
        family, table = p["family"], p["table"]
        body = RTMSG.pack(family, p["dst_len"], 0, 0, table if table < 256 else 0,
                          p["proto"], p["scope"], RTN_UNICAST, p.get("flags", 0)
                          ) + u32(RTA_TABLE, table)
        if "dst" in p:
            body += attr(RTA_DST, socket.inet_pton(family, p["dst"]))
        if "gateway" in p:
            body += attr(RTA_GATEWAY, socket.inet_pton(family, p["gateway"]))
        body += u32(RTA_OIF, self.index_of(op.link)) + u32(RTA_PRIORITY, p["priority"])
        if op.what == "route-add":
            return Request(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, body)
        return Request(RTM_DELROUTE, 0, body)


def _accepted(op: NetOp, code: int, tolerant: bool) -> bool:
    """A removal whose target the kernel already dropped (ENOENT, ESRCH, ENODEV,
    EADDRNOTAVAIL) reached its goal; a rollback also accepts EEXIST."""
    gone = op.what.endswith("-del") and code in (2, 3, 19, 99)
    return gone or (tolerant and code == 17)


def _refused(op: NetOp, err: RtnlError) -> PermanentError:
    kind = dict(op.params).get("kind")
    if op.what == "link-add" and err.errno == EOPNOTSUPP and kind in KERNEL_MODULE:
        return PermanentError(
            f"cannot create {kind} {op.link}: the kernel has no "
            f"{KERNEL_MODULE[kind]} support (module {KERNEL_MODULE[kind]})",
            reason=Reason.KernelFeatureMissing,
            hint=f"use an image whose kernel has the {KERNEL_MODULE[kind]} "
                 "module; the persistent configuration is unaffected")
    return PermanentError(f"netlink refused to {op.summary}: {err}")
