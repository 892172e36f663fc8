"""What the node's namespace holds now: links, global addresses and routes, read over
netlink. An `Observed` taken before a change is the snapshot a rollback returns to."""

from __future__ import annotations

import ipaddress
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from agent.config.interfaces import IPInterface
from agent.netlink.rtnl import (
    IFADDRMSG,
    IFINFOMSG,
    IFLA_EXT_MASK,
    RTEXT_FILTER_SKIP_STATS,
    RTM_GETADDR,
    RTM_GETLINK,
    RTM_GETROUTE,
    RTMSG,
    U32,
    Rtnl,
    attributes,
    ip_text,
    text,
    u32,
)

if TYPE_CHECKING:
    from agent.host import Host

RTPROT_KERNEL = 2
RT_TABLE_LOCAL = 255
RTN_UNICAST = 1
RT_SCOPE_UNIVERSE = 0
IFF_UP = 1
IFLA_ADDRESS, IFLA_IFNAME, IFLA_MTU, IFLA_LINK, IFLA_MASTER = 1, 3, 4, 5, 10
IFLA_LINKINFO, IFLA_PERM_ADDRESS, IFLA_INFO_KIND = 18, 54, 1
IFLA_AF_SPEC, IFLA_INET6_CONF, DEVCONF_ACCEPT_RA = 26, 2, 3
IFLA_INET6_ADDR_GEN_MODE, DEVCONF_USE_TEMPADDR = 8, 10
LINK_FIELDS = frozenset({IFLA_ADDRESS, IFLA_IFNAME, IFLA_MTU, IFLA_LINK, IFLA_MASTER,
                         IFLA_LINKINFO, IFLA_PERM_ADDRESS, IFLA_AF_SPEC})
IFA_ADDRESS, IFA_LOCAL, IFA_BROADCAST = 1, 2, 4
RTA_DST, RTA_OIF, RTA_GATEWAY, RTA_PRIORITY, RTA_TABLE = 1, 4, 5, 6, 15


@dataclass(frozen=True)
class LinkState:
    index: int
    name: str
    kind: str | None
    """IFLA_INFO_KIND: veth, bridge, bond, vlan, macvlan; None for a plain NIC."""
    mac: str
    """The current address: what the link sends from (ARP probes use it)."""
    mtu: int
    up: bool
    master: int | None
    parent: int | None
    perm_mac: str | None = None
    """IFLA_PERM_ADDRESS: the address burnt into a NIC, which networkd's and netplan's
    MAC match use. Virtual links (bridge, bond, VLAN, macvlan, veth) have none, even
    when they carry a NIC's address as their current one."""
    accept_ra: int | None = None
    """net.ipv6.conf.LINK.accept_ra; None when the link has no IPv6."""
    addr_gen_mode: int | None = None
    """IFLA_INET6_ADDR_GEN_MODE (1: none, no IPv6 link-local address); None without IPv6."""
    use_tempaddr: int | None = None
    """net.ipv6.conf.LINK.use_tempaddr (2: privacy addresses preferred); None without IPv6."""


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

    # Lookups by name and by link index, built once: the differ and verify ask for
    # every planned link, and scanning 1,000 addresses per link was 0.1 s of a run.
    @cached_property
    def _by_name(self) -> dict[str, LinkState]:
        return {link.name: link for link in self.links}

    @cached_property
    def _by_index(self) -> dict[int, LinkState]:
        return {link.index: link for link in self.links}

    @cached_property
    def _addresses_by_index(self) -> dict[int, set[str]]:
        found: dict[int, set[str]] = {}
        for index, address in self.addresses:
            found.setdefault(index, set()).add(address)
        return found

    @cached_property
    def _routes_by_index(self) -> dict[int, set[RouteState]]:
        found: dict[int, set[RouteState]] = {}
        for route in self.routes:
            found.setdefault(route.oif, set()).add(route)
        return found

    def link(self, name: str) -> LinkState | None:
        return self._by_name.get(name)

    def at(self, index: int) -> LinkState | None:
        """The link of kernel index `index` (it keeps its index when renamed)."""
        return self._by_index.get(index)

    def name_of(self, index: int | None) -> str | None:
        link = self._by_index.get(index) if index is not None else None
        return link.name if link is not None else None

    def addresses_of(self, name: str) -> set[str]:
        link = self.link(name)
        return set(self._addresses_by_index.get(link.index, ())) if link else set()

    def routes_of(self, name: str) -> set[RouteState]:
        link = self.link(name)
        return set(self._routes_by_index.get(link.index, ())) if link else set()

    def restricted(self, names: set[str]) -> dict[str, Any]:
        """The part of the state on `names`, by name: what a rollback must restore."""
        return {
            name: (None if (link := self.link(name)) is None else
                   (link.kind, link.mtu, link.up, link.accept_ra, link.addr_gen_mode,
                    link.use_tempaddr,
                    self.name_of(link.master),
                    sorted(self.addresses_of(name)),
                    sorted((r.key, r.proto, r.scope) for r in self.routes_of(name))))
            for name in sorted(names)}


def observe(rtnl: Rtnl, *, routes: bool = True) -> Observed:
    """The namespace's state; `routes=False` skips the route dump when only addresses
    matter. Each message is parsed for the few fields kept, and messages that are
    dropped anyway (host-scope addresses, the kernel's own routes) are dropped on their
    fixed header alone: the IPv6 local table holds a route per address."""
    found_links = links(rtnl)
    addresses = frozenset(a for a in map(_address, addr_dump(rtnl)) if a is not None)
    found: set[RouteState] = set()
    for family in (socket.AF_INET, socket.AF_INET6) if routes else ():
        for _, body in rtnl.dump(RTM_GETROUTE, RTMSG.pack(family, 0, 0, 0, 0, 0, 0, 0, 0)):
            if (route := _route(body)) is not None:
                found.add(route)
    return Observed(found_links, addresses, frozenset(found))


def links(rtnl: Rtnl) -> tuple[LinkState, ...]:
    return tuple(_link(body) for _, body in
                 rtnl.dump(RTM_GETLINK, IFINFOMSG.pack(0, 0, 0, 0, 0)
                           + u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS)))


def kernel_text(address: IPInterface) -> str:
    """An address with its prefix length as an address dump spells it (inet_ntop), to
    compare the plan with the kernel; 10 times cheaper than str() on 1,000 addresses."""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    return f"{socket.inet_ntop(family, address.packed)}/{address.network.prefixlen}"


def addr_dump(rtnl: Rtnl, family: int = socket.AF_UNSPEC) -> Iterator[memoryview]:
    """The bodies of an address dump of `family` (every family by default)."""
    return (body for _, body in rtnl.dump(RTM_GETADDR, IFADDRMSG.pack(family, 0, 0, 0, 0)))


def _link(body: memoryview) -> LinkState:
    _, _, index, flags, _ = IFINFOMSG.unpack_from(body)
    nla = attributes(body, IFINFOMSG.size, len(body), LINK_FIELDS)
    info = nla.get(IFLA_LINKINFO)
    kind = attributes(info, 0, len(info)).get(IFLA_INFO_KIND) if info is not None else None
    mac, perm = nla.get(IFLA_ADDRESS), nla.get(IFLA_PERM_ADDRESS)
    return LinkState(
        index=index, name=text(nla[IFLA_IFNAME]),
        kind=text(kind) if kind is not None else None,
        mac=bytes(mac).hex(":") if mac is not None else "",
        mtu=_u32(nla, IFLA_MTU) or 0, up=bool(flags & IFF_UP),
        master=_u32(nla, IFLA_MASTER), parent=_u32(nla, IFLA_LINK),
        perm_mac=bytes(perm).hex(":") if perm is not None else None,
        accept_ra=_devconf(nla.get(IFLA_AF_SPEC), DEVCONF_ACCEPT_RA),
        use_tempaddr=_devconf(nla.get(IFLA_AF_SPEC), DEVCONF_USE_TEMPADDR),
        addr_gen_mode=_addr_gen_mode(nla.get(IFLA_AF_SPEC)))


def _addr_gen_mode(spec: memoryview | None) -> int | None:
    inet6 = attributes(spec, 0, len(spec)).get(socket.AF_INET6) if spec is not None else None
    mode = attributes(inet6, 0, len(inet6)).get(IFLA_INET6_ADDR_GEN_MODE) \
        if inet6 is not None else None
    return mode[0] if mode is not None and len(mode) else None


def _devconf(spec: memoryview | None, index: int) -> int | None:
    """A net.ipv6.conf value (accept_ra, use_tempaddr) from IFLA_AF_SPEC / AF_INET6 /
    IFLA_INET6_CONF, an array of s32 by DEVCONF_* index: netlink reads it, though only
    /proc/sys can change it."""
    inet6 = attributes(spec, 0, len(spec)).get(socket.AF_INET6) if spec is not None else None
    conf = attributes(inet6, 0, len(inet6)).get(IFLA_INET6_CONF) if inet6 is not None else None
    if conf is None or len(conf) < 4 * (index + 1):
        return None
    return int(struct.unpack_from("=i", conf, 4 * index)[0])


def _address(body: memoryview) -> tuple[int, str] | None:
    """(link index, address/prefix) of a global-scope address; None for any other."""
    family, prefixlen, _, scope, index = IFADDRMSG.unpack_from(body)
    if scope != RT_SCOPE_UNIVERSE:
        return None
    nla = attributes(body, IFADDRMSG.size, len(body))
    value = nla.get(IFA_ADDRESS) or nla.get(IFA_LOCAL)
    return None if value is None else (index, f"{ip_text(family, value)}/{prefixlen}")


def _route(body: memoryview) -> RouteState | None:
    """A route the kernel did not make itself: not proto kernel, not in the local
    table, unicast, through one link. None for any other."""
    family, dst_len, _, _, table, proto, scope, kind, _ = RTMSG.unpack_from(body)
    if proto == RTPROT_KERNEL or table == RT_TABLE_LOCAL or kind != RTN_UNICAST:
        return None
    nla = attributes(body, RTMSG.size, len(body))
    oif = _u32(nla, RTA_OIF)
    if oif is None:
        return None
    dst = ip_text(family, nla[RTA_DST]) if RTA_DST in nla else (
        "0.0.0.0" if family == socket.AF_INET else "::")
    return RouteState(
        oif=oif, dst=str(ipaddress.ip_network(f"{dst}/{dst_len}")),
        via=ip_text(family, nla[RTA_GATEWAY]) if RTA_GATEWAY in nla else None,
        table=_u32(nla, RTA_TABLE) or table, metric=_u32(nla, RTA_PRIORITY) or 0,
        proto=proto, scope=scope)


def _u32(nla: dict[int, memoryview], kind: int) -> int | None:
    value = nla.get(kind)
    return None if value is None else int(U32.unpack_from(value)[0])


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
