"""What the node's namespace holds now: links, global addresses and routes, read over
netlink. An `Observed` taken before a change is the snapshot a rollback returns to."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent.errors import PermanentError, Reason
from agent.phases.network.model import LinkPlan, NetworkPlan

if TYPE_CHECKING:
    from pyroute2 import IPRoute

    from agent.host import Host

RTPROT_KERNEL = 2
RT_TABLE_LOCAL = 255
RTN_UNICAST = 1
IFF_UP = 1


@dataclass(frozen=True)
class LinkState:
    index: int
    name: str
    kind: str | None
    """IFLA_INFO_KIND: veth, bridge, bond, vlan, macvlan; None for a plain NIC."""
    mac: str
    mtu: int
    up: bool
    master: int | None
    parent: int | None


@dataclass(frozen=True)
class RouteState:
    oif: int
    dst: str
    via: str | None
    table: int
    metric: int
    proto: int
    scope: int

    @property
    def family(self) -> int:
        return ipaddress.ip_network(self.dst).version

    @property
    def key(self) -> tuple[str, str | None, int, int]:
        return (self.dst, self.via, self.table, self.metric)


@dataclass(frozen=True)
class Observed:
    links: tuple[LinkState, ...]
    addresses: frozenset[tuple[int, str]]
    """(link index, address with prefix length) of every global-scope address."""
    routes: frozenset[RouteState]
    """Routes the kernel did not make itself (no proto kernel, no local table)."""

    def link(self, name: str) -> LinkState | None:
        return next((link for link in self.links if link.name == name), None)

    def name_of(self, index: int | None) -> str | None:
        return next((link.name for link in self.links if link.index == index), None)

    def addresses_of(self, name: str) -> set[str]:
        link = self.link(name)
        return {a for i, a in self.addresses if link is not None and i == link.index}

    def routes_of(self, name: str) -> set[RouteState]:
        link = self.link(name)
        return {r for r in self.routes if link is not None and r.oif == link.index}

    def restricted(self, names: set[str]) -> dict[str, Any]:
        """The part of the state on `names`, by name: what a rollback must restore."""
        return {
            name: (None if (link := self.link(name)) is None else
                   (link.kind, link.mtu, link.up, self.name_of(link.master),
                    sorted(self.addresses_of(name)),
                    sorted((r.key, r.proto, r.scope) for r in self.routes_of(name))))
            for name in sorted(names)}


def observe(ipr: IPRoute, *, routes: bool = True) -> Observed:
    """The namespace's state; `routes=False` skips the route dump (the largest: the
    kernel's local table holds a route per address) when only addresses matter."""
    links = tuple(_link(msg) for msg in ipr.get_links())
    addresses = frozenset(
        (msg["index"], f"{msg.get('IFA_ADDRESS')}/{msg['prefixlen']}")
        for msg in ipr.get_addr() if msg["scope"] == 0)
    found: set[RouteState] = set()
    for family in (2, 10) if routes else ():
        for msg in ipr.get_routes(family=family):  # every table
            table = msg.get("RTA_TABLE") or msg["table"]
            if (msg["proto"] == RTPROT_KERNEL or table == RT_TABLE_LOCAL
                    or msg["type"] != RTN_UNICAST or msg.get("RTA_OIF") is None):
                continue
            dst = msg.get("RTA_DST") or ("0.0.0.0" if family == 2 else "::")
            found.add(RouteState(
                oif=msg.get("RTA_OIF"), dst=str(ipaddress.ip_network(f"{dst}/{msg['dst_len']}")),
                via=msg.get("RTA_GATEWAY"), table=table,
                metric=msg.get("RTA_PRIORITY") or 0, proto=msg["proto"], scope=msg["scope"]))
    return Observed(links, addresses, frozenset(found))


def _link(msg: Any) -> LinkState:
    return LinkState(
        index=msg["index"], name=msg.get("IFLA_IFNAME"),
        kind=msg.get_nested("IFLA_LINKINFO", "IFLA_INFO_KIND"),
        mac=(msg.get("IFLA_PERM_ADDRESS") or msg.get("IFLA_ADDRESS") or "").lower(),
        mtu=msg.get("IFLA_MTU"), up=bool(msg["flags"] & IFF_UP),
        master=msg.get("IFLA_MASTER"), parent=msg.get("IFLA_LINK"))


def resolve_names(host: Host, plan: NetworkPlan, now: Observed) -> dict[str, str]:
    """Kernel name of each planned link. An ethernet entry must match exactly one link
    (by name, MAC address or driver); the links the agent creates are named as planned."""
    names: dict[str, str] = {}
    drivers: dict[str, str | None] = {}
    for link in plan.links:
        if link.virtual:
            names[link.name] = link.name
            continue
        found = _matching(host, link, now, drivers)
        if len(found) != 1:
            what = ("no link" if not found else
                    f"{len(found)} links ({', '.join(sorted(found))})")
            raise PermanentError(f"interface {link.name}: {what} matches {_criterion(link)}",
                                 reason=Reason.InterfaceNotFound)
        names[link.name] = found[0]
    return names


def _criterion(link: LinkPlan) -> str:
    if link.match_mac:
        return f"MAC address {link.match_mac}"
    if link.match_driver:
        return f"driver {link.match_driver}"
    return f"name {link.match_name or link.name}"


def _matching(host: Host, link: LinkPlan, now: Observed,
              drivers: dict[str, str | None]) -> list[str]:
    if link.match_mac:
        return [s.name for s in now.links if s.mac == link.match_mac]
    if link.match_driver:
        for s in now.links:
            if s.name not in drivers:
                drivers[s.name] = link_driver(host, s.name)
        return [s.name for s in now.links if drivers[s.name] == link.match_driver]
    wanted = link.match_name or link.name
    return [s.name for s in now.links if s.name == wanted]


SIOCETHTOOL = 0x8946
ETHTOOL_GDRVINFO = 3
_DRVINFO_SIZE = 196
"""sizeof(struct ethtool_drvinfo) in linux/ethtool.h."""


def link_driver(host: Host, name: str) -> str | None:
    """The driver `ethtool -i` shows, asked with the ETHTOOL_GDRVINFO ioctl in the node's
    namespace; None for links without one (loopback)."""
    import ctypes
    import fcntl
    import socket
    import struct

    buf = ctypes.create_string_buffer(struct.pack("I", ETHTOOL_GDRVINFO), _DRVINFO_SIZE)
    request = struct.pack("16sP", name.encode(), ctypes.addressof(buf))
    with host.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            fcntl.ioctl(sock.fileno(), SIOCETHTOOL, request)
        except OSError:
            return None
    return buf.raw[4:36].split(b"\0", 1)[0].decode() or None
