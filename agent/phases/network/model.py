"""NetworkPlan: the neutral, resolved picture of the wanted network, built purely from
`spec.network` and the IPAM allocations. Renderers and the live differ both read it."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from agent.config.interfaces import (
    BondSpec,
    BridgeSpec,
    InterfaceSpec,
    InterfaceType,
    IPAMRef,
    IPInterface,
)
from agent.config.network import NetworkSpec
from agent.ipam.base import Allocation
from agent.recordtype import record

RT_TABLE_MAIN = 254
DEFAULT_METRIC = {4: 0, 6: 1024}
STP_FORWARD_DELAY = 15
"""The kernel's bridge forward delay in seconds, when the configuration gives none."""
"""What the kernel stores when a route is added without a metric."""


@record(frozen=True)
class RoutePlan:
    dst: str
    """Network with prefix length; `0.0.0.0/0` or `::/0` for a default route."""
    via: str | None
    metric: int | None = None
    table: int | None = None
    on_link: bool = False

    @property
    def family(self) -> int:
        return ipaddress.ip_network(self.dst).version

    @property
    def is_default(self) -> bool:
        return ipaddress.ip_network(self.dst).prefixlen == 0

    @property
    def key(self) -> tuple[str, str | None, int, int]:
        """What identifies the route in the kernel (per link)."""
        metric = self.metric if self.metric is not None else DEFAULT_METRIC[self.family]
        return (self.dst, self.via, self.table or RT_TABLE_MAIN, metric)


@record(frozen=True)
class PlannedClaim:
    """An address the phase would claim from an IPAM pool, not yet claimed."""

    interface: str
    index: int
    """Position in the interface's `addresses`."""
    ref: IPAMRef

    def __str__(self) -> str:
        return (f"claim an {self.ref.family} address for {self.interface} from pool "
                f"{self.ref.pool!r} (IPAM plugin {self.ref.plugin})")


@record(frozen=True)
class LinkPlan:
    name: str
    kind: InterfaceType
    match_name: str | None = None
    match_mac: str | None = None
    match_driver: str | None = None
    mtu: int | None = None
    parent: str | None = None
    vlan_id: int | None = None
    vlan_protocol: str | None = None
    bond: BondSpec | None = None
    stp: bool = False
    forward_delay: int | None = None
    bridge: BridgeSpec | None = None
    macvlan_mode: str | None = None
    master: str | None = None
    """The bond or bridge this link is enslaved to."""
    addresses: tuple[IPInterface, ...] = ()
    dhcp4: bool = False
    dhcp6: bool = False
    routes: tuple[RoutePlan, ...] = ()
    children: tuple[str, ...] = ()
    """VLANs and macvlans riding on this link (networkd names them in its .network)."""
    rename: bool = False
    """The matched link gets `name` as its kernel name."""
    accept_ra: bool | None = None
    """Router advertisements accepted (True), refused (False), or left as they are
    (None: IPv6 is left to DHCP and no choice was given)."""
    nameservers: tuple[str, ...] = ()
    search: tuple[str, ...] = ()
    """DNS of this link alone (systemd-resolved's per-link DNS)."""
    link_local: tuple[str, ...] | None = None
    """Families with a link-local address (netplan link-local); None: networkd's default."""
    ipv6_privacy: bool = False
    optional: bool = False
    """systemd-networkd-wait-online does not wait for the link (RequiredForOnline=no)."""

    @property
    def virtual(self) -> bool:
        """Created by the agent (bridge, bond, VLAN, macvlan), not found on the host."""
        return self.kind != "ethernet"

    @property
    def managed_families(self) -> frozenset[int]:
        """Address families whose addresses and routes the agent owns on this link."""
        return frozenset(f for f, dhcp in ((4, self.dhcp4), (6, self.dhcp6)) if not dhcp)


@record(frozen=True)
class NetworkPlan:
    links: tuple[LinkPlan, ...] = ()
    """In creation order: a parent or member comes before the link that needs it."""
    pending: tuple[PlannedClaim, ...] = ()
    nameservers: tuple[str, ...] = ()
    search: tuple[str, ...] = ()
    hostname: str | None = None
    primary_address: str | None = None
    """The address /etc/hosts gives the host name: the first static or claimed one."""

    def link(self, name: str) -> LinkPlan:
        return next(link for link in self.links if link.name == name)

    def carrier_delay(self, names: Iterable[str]) -> float:
        """Seconds the STP bridges among `names` may go without carrier once up: their
        ports listen, then learn, for one forward delay each before they forward. No
        IPv6 address completes DAD and no neighbour answers there until then; networkd
        waits it out, so the live apply's waits for those links are that much longer."""
        wanted = set(names)
        return max((2.0 * (link.forward_delay or STP_FORWARD_DELAY) for link in self.links
                    if link.kind == "bridge" and link.stp and link.name in wanted),
                   default=0.0)

    def all_dns(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(servers, search domains): the global ones, then each link's, once each —
        for where DNS can only be global (/etc/resolv.conf)."""
        servers, search = list(self.nameservers), list(self.search)
        for link in self.links:
            servers += [s for s in link.nameservers if s not in servers]
            search += [d for d in link.search if d not in search]
        return tuple(servers), tuple(search)

    @property
    def gateways(self) -> list[tuple[str, str]]:
        """(link, gateway) of every default route, for the gateway check."""
        return [(link.name, r.via) for link in self.links for r in link.routes
                if r.is_default and r.via is not None]


def ipam_refs(spec: NetworkSpec) -> list[PlannedClaim]:
    """Every address the configuration takes from an IPAM pool."""
    return [PlannedClaim(iface.name, i, a.ipam) for iface in spec.interfaces
            for i, a in enumerate(iface.addresses) if a.ipam is not None]


def build_plan(spec: NetworkSpec,
               allocations: Mapping[tuple[str, int], Allocation] | None = None) -> NetworkPlan:
    """The plan for `spec`, with claimed addresses from `allocations` keyed by
    (interface, index); IPAM addresses without one are listed as pending claims."""
    allocations = allocations or {}
    masters = {m: iface.name for iface in spec.interfaces for m in iface.members}
    children: dict[str, list[str]] = {}
    for iface in spec.interfaces:
        if iface.parent is not None:
            children.setdefault(iface.parent, []).append(iface.name)
    links = [_link(iface, allocations, masters.get(iface.name),
                   tuple(children.get(iface.name, ()))) for iface in spec.interfaces]
    nameservers = list(spec.dns.nameservers)
    pending = tuple(c for c in ipam_refs(spec) if (c.interface, c.index) not in allocations)
    primary = next((str(a.ip) for link in links for a in link.addresses), None)
    return NetworkPlan(tuple(_ordered(links)), pending, tuple(nameservers),
                       tuple(spec.dns.search), spec.hostname, primary)


def _link(iface: InterfaceSpec, allocations: Mapping[tuple[str, int], Allocation],
          master: str | None, children: tuple[str, ...]) -> LinkPlan:
    addresses: list[IPInterface] = []
    gateways: dict[int, str] = {}
    for i, spec in enumerate(iface.addresses):
        if spec.interface is not None:
            addresses.append(spec.interface)
        elif (alloc := allocations.get((iface.name, i))) is not None:
            addresses.append(alloc.interface)
            if alloc.gateway is not None:
                gateways.setdefault(alloc.interface.version, alloc.gateway)
    nameservers = list(iface.dns.nameservers) if iface.dns else []
    for i in range(len(iface.addresses)):
        # a pool's DNS servers are its network's: this link's, as v2 nameservers are
        alloc = allocations.get((iface.name, i))
        nameservers += [s for s in (alloc.dns_servers if alloc else ())
                        if s not in nameservers]
    for gw in (iface.gateway, iface.gateway6):
        if gw is not None:
            gateways[ipaddress.ip_address(gw).version] = gw
    routes = [RoutePlan("0.0.0.0/0" if family == 4 else "::/0", gw)
              for family, gw in sorted(gateways.items())]
    for r in iface.routes:
        dst = r.to if r.to != "default" else ("0.0.0.0/0" if r.family == 4 else "::/0")
        routes.append(RoutePlan(dst, r.via, r.metric, r.table, r.on_link))
    match = iface.match
    dhcp6 = any(a.dhcp == "ipv6" for a in iface.addresses)
    return LinkPlan(
        name=iface.name, kind=iface.type,
        match_name=match.name if match else None,
        match_mac=match.mac_address.lower() if match and match.mac_address else None,
        match_driver=match.driver if match else None,
        mtu=iface.mtu, parent=iface.parent,
        vlan_id=iface.vlan.id if iface.vlan else None,
        vlan_protocol=iface.vlan.protocol if iface.vlan else None, bond=iface.bond,
        stp=iface.bridge.stp if iface.bridge else False,
        forward_delay=iface.bridge.forward_delay if iface.bridge else None,
        bridge=iface.bridge,
        macvlan_mode=iface.macvlan.mode if iface.macvlan else None,
        master=master, addresses=tuple(addresses),
        dhcp4=any(a.dhcp == "ipv4" for a in iface.addresses),
        dhcp6=dhcp6,
        routes=tuple(routes), children=children, rename=iface.rename,
        nameservers=tuple(nameservers),
        search=tuple(iface.dns.search) if iface.dns else (),
        accept_ra=iface.accept_ra if iface.accept_ra is not None else (
            None if dhcp6 else False),
        link_local=tuple(iface.link_local) if iface.link_local is not None else None,
        ipv6_privacy=iface.ipv6_privacy, optional=iface.optional)


def _ordered(links: list[LinkPlan]) -> list[LinkPlan]:
    """Parents before the VLANs and macvlans riding on them (a bounded number of passes
    settles any configuration; what a cycle leaves over keeps its place at the end)."""
    needs = {link.name: {link.parent} if link.parent else set() for link in links}
    done: list[LinkPlan] = []
    names: set[str] = set()
    for _ in range(len(links)):
        placed = len(done)
        for link in links:
            if link.name not in names and needs[link.name] <= names:
                done.append(link)
                names.add(link.name)
        if len(done) == placed:  # settled; the passes left were n² for nothing
            break
    done += [link for link in links if link.name not in names]
    return done
