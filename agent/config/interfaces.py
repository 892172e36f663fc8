"""`spec.network.interfaces[]`: one interface, how it is found, its addresses (static or
from IPAM), routes, DNS, and the link it is (VLAN, bond, bridge, macvlan)."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterator
from typing import Literal

from agent.config import checks
from agent.config.fields import setting
from agent.recordtype import record

Problem = tuple[str, str, str | None]
RT_TABLE_MAIN = 254
DEFAULT_ROUTE_METRIC = {4: 0, 6: 1024}
"""The kernel's main table and its metric of a route given none, per family (as
agent.phases.network.model has them; config does not import the phases)."""
IPInterface = ipaddress.IPv4Interface | ipaddress.IPv6Interface
DEFAULT_MTU = 1500
IPV6_MIN_MTU = 1280


@record(frozen=True)
class IPAMRef:
    plugin: str = setting("IPAM plugin name (entry point in group machine_agent.ipam).",
                          check=checks.k8s_name)
    pool: str = setting("Pool in that backend.", check=checks.safe_text)
    family: Literal["ipv4", "ipv6"] = setting("Address family to claim.", default="ipv4")


@record(frozen=True)
class AddressSpec:
    static: str | None = setting("Static address with prefix length, e.g. 192.0.2.10/24.",
                                 default=None, check=checks.ip_interface)
    ipam: IPAMRef | None = setting("Claim the address from an IPAM pool.", default=None)
    dhcp: Literal["ipv4", "ipv6"] | None = setting("Leave this family to DHCP.", default=None)

    def validate(self) -> Iterator[Problem]:
        given = [k for k in ("static", "ipam", "dhcp") if getattr(self, k) is not None]
        if len(given) != 1:
            yield ("", "give exactly one of static, ipam or dhcp", None)
        if self.static is not None:
            iface = ipaddress.ip_interface(self.static)
            net = iface.network
            if iface.ip.is_unspecified or iface.ip.is_multicast or \
                    iface.ip == ipaddress.IPv4Address("255.255.255.255"):
                yield ("static", f"{iface.ip} cannot be an interface's address (unspecified, "
                                 "multicast or broadcast)", "give a unicast host address")
            elif iface.version == 4 and net.prefixlen < 31 and iface.ip in (
                    net.network_address, net.broadcast_address):
                yield ("static", f"{iface.ip} is the network or broadcast address of {net}",
                       "use a host address inside the subnet")

    @functools.cached_property
    def interface(self) -> IPInterface | None:
        return ipaddress.ip_interface(self.static) if self.static else None


@record(frozen=True)
class RouteSpec:
    to: str = setting("Destination network, or `default`.", check=checks.route_destination)
    via: str | None = setting("Next hop; without it the route is on-link.", default=None,
                              check=checks.ip_address)
    metric: int | None = setting("Route metric (lower wins).", default=None)
    table: int | None = setting("Routing table id (default: main).", default=None,
                                check=checks.route_table)
    on_link: bool = setting(
        "The next hop is on the link though outside its subnets (onlink; networkd "
        "GatewayOnLink=, netplan on-link).", default=False, key="onLink")

    def validate(self) -> Iterator[Problem]:
        if self.on_link and self.via is None:
            yield ("onLink", "is for a route with a next hop (via)", None)
        if self.metric is not None and not 0 <= self.metric < 2**32:
            yield ("metric", f"{self.metric} is not a metric (0-4294967295)", None)
        if self.via is not None and self.to != "default":
            to = ipaddress.ip_network(self.to)
            if to.version != ipaddress.ip_address(self.via).version:
                yield ("via", f"next hop {self.via} is not in the family of {self.to}", None)

    @property
    def family(self) -> int | None:
        """4 or 6; None for `default` without a next hop (not allowed, see InterfaceSpec)."""
        if self.to != "default":
            return ipaddress.ip_network(self.to).version
        return ipaddress.ip_address(self.via).version if self.via else None


@record(frozen=True)
class MatchSpec:
    name: str | None = setting(
        "Kernel name of the link, or a shell glob of names (`en*`, as netplan and "
        "networkd's Name= take it) that must find exactly one link.", default=None,
        check=checks.interface_name_or_glob)
    mac_address: str | None = setting(
        "Permanent MAC address of the link (a veth has none: match it by name).",
        default=None, check=checks.mac_address)
    driver: str | None = setting("Kernel driver of the link (as `ethtool -i` shows).",
                                 default=None, check=checks.driver_name)

    def validate(self) -> Iterator[Problem]:
        given = [k for k in ("name", "mac_address", "driver") if getattr(self, k) is not None]
        if len(given) != 1:
            yield ("", "give exactly one of name, macAddress or driver", None)


@record(frozen=True)
class LinkDNSSpec:
    nameservers: list[str] = setting("DNS servers reached through this link, in order.",
                                     factory=list, check=checks.ip_address)
    search: list[str] = setting("Search domains for this link.", factory=list,
                                check=checks.fqdn)


@record(frozen=True)
class VLANSpec:
    id: int = setting("802.1Q VLAN id.", check=checks.vlan_id)
    parent: str = setting("Interface entry the VLAN rides on.", check=checks.interface_name)
    protocol: Literal["802.1q", "802.1ad"] | None = setting(
        "Tag protocol (802.1ad: QinQ); default 802.1q. netplan cannot write 802.1ad.",
        default=None)


@record(frozen=True)
class BondSpec:
    members: list[str] = setting("Interface entries enslaved to the bond.",
                                 check=checks.interface_name)
    mode: Literal["balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad",
                  "balance-tlb", "balance-alb"] = setting("Bonding mode.",
                                                         default="active-backup")
    miimon: int = setting("MII link monitoring interval in milliseconds.", default=100)
    primary: str | None = setting(
        "Preferred member (active-backup, balance-tlb, balance-alb).", default=None,
        check=checks.interface_name)
    lacp_rate: Literal["slow", "fast"] | None = setting(
        "How often the partner sends LACPDUs (802.3ad only); kernel default slow.",
        default=None, key="lacpRate")
    transmit_hash_policy: Literal["layer2", "layer3+4", "layer2+3", "encap2+3",
                                  "encap3+4", "vlan+srcmac"] | None = setting(
        "How a member is chosen for a packet (balance-xor, 802.3ad, balance-tlb); "
        "kernel default layer2.", default=None, key="transmitHashPolicy")
    up_delay: int | None = setting(
        "Milliseconds a member's link must be up before it is used (a multiple of miimon); "
        "kernel default 0.", default=None, key="upDelay")
    down_delay: int | None = setting(
        "Milliseconds a member's link must be down before it is dropped (a multiple of "
        "miimon); kernel default 0.", default=None, key="downDelay")
    min_links: int | None = setting(
        "Members that must be up for the bond to have carrier; kernel default 0.",
        default=None, key="minLinks")

    def validate(self) -> Iterator[Problem]:
        # the kernel refuses these options in other modes (bond_options.c unsuppmodes)
        if self.primary is not None and self.mode not in (
                "active-backup", "balance-tlb", "balance-alb"):
            yield ("primary", f"has no meaning in mode {self.mode}",
                   "use mode active-backup, balance-tlb or balance-alb, or drop primary")
        if self.lacp_rate is not None and self.mode != "802.3ad":
            yield ("lacpRate", f"has no meaning in mode {self.mode}",
                   "use mode 802.3ad, or drop lacpRate")
        if self.miimon < 0:
            yield ("miimon", f"{self.miimon} is negative", None)
        for key, value in (("upDelay", self.up_delay), ("downDelay", self.down_delay)):
            # the kernel rounds a delay down to a multiple of miimon, and ignores it without
            if value is not None and (value < 0 or (value and not self.miimon)
                                      or (self.miimon and value % self.miimon)):
                yield (key, f"{value} is not a multiple of miimon ({self.miimon} ms)",
                       "give a multiple of miimon, with miimon above 0")
        if self.min_links is not None and not 0 <= self.min_links < 2**32:
            yield ("minLinks", f"{self.min_links} is not a count (0-4294967295)", None)


@record(frozen=True)
class BridgeSpec:
    members: list[str] = setting("Interface entries attached to the bridge.", factory=list,
                                 check=checks.interface_name)
    stp: bool = setting("Spanning tree protocol.", default=False)
    forward_delay: int | None = setting(
        "Seconds a port spends listening and learning before forwarding (with STP: "
        "2-30); kernel default 15.", default=None, key="forwardDelay")
    hello_time: int | None = setting(
        "Seconds between hello packets with STP (1-10); kernel default 2.", default=None,
        key="helloTime")
    max_age: int | None = setting(
        "Seconds a received hello is valid with STP (6-40); kernel default 20.",
        default=None, key="maxAge")
    priority: int | None = setting(
        "Bridge priority for the STP root election (0-65535, lower wins); kernel default "
        "32768.", default=None)

    def validate(self) -> Iterator[Problem]:
        low = 2 if self.stp else 0  # br_set_forward_delay: ERANGE outside 2-30s with STP
        if self.forward_delay is not None and not low <= self.forward_delay <= 30:
            yield ("forwardDelay", f"{self.forward_delay} is outside {low}-30 seconds",
                   None)
        # the kernel's ranges (br_set_hello_time, br_set_max_age): ERANGE outside them
        for key, value, least, most in (("helloTime", self.hello_time, 1, 10),
                                        ("maxAge", self.max_age, 6, 40),
                                        ("priority", self.priority, 0, 65535)):
            if value is not None and not least <= value <= most:
                yield (key, f"{value} is outside {least}-{most}", None)


@record(frozen=True)
class MacvlanSpec:
    parent: str = setting("Interface entry the macvlan sits on.", check=checks.interface_name)
    mode: Literal["bridge", "private", "vepa", "passthru"] = setting(
        "macvlan mode.", default="bridge")


InterfaceType = Literal["ethernet", "vlan", "bond", "bridge", "macvlan"]
_SECTIONS = ("vlan", "bond", "bridge", "macvlan")


@record(frozen=True)
class InterfaceSpec:
    name: str = setting("Interface name on the node; other entries refer to it by this name.",
                        check=checks.interface_name)
    type: InterfaceType = setting("Kind of interface.", default="ethernet")
    match: MatchSpec | None = setting(
        "Find an ethernet link by name, MAC address or driver instead of by `name`.",
        default=None)
    vlan: VLANSpec | None = setting("VLAN settings (type vlan).", default=None)
    bond: BondSpec | None = setting("Bond settings (type bond).", default=None)
    bridge: BridgeSpec | None = setting("Bridge settings (type bridge).", default=None)
    macvlan: MacvlanSpec | None = setting("macvlan settings (type macvlan).", default=None)
    addresses: list[AddressSpec] = setting("Addresses of the interface.", factory=list)
    gateway: str | None = setting("Default gateway reached through this interface.",
                                  default=None, check=checks.ip_address)
    gateway6: str | None = setting("IPv6 default gateway, when `gateway` is IPv4.",
                                   default=None, check=checks.ip_address)
    routes: list[RouteSpec] = setting("Extra routes through this interface.", factory=list)
    mtu: int | None = setting("MTU in bytes.", default=None, check=checks.mtu)
    dns: LinkDNSSpec | None = setting(
        "DNS of this link (networkd [Network] DNS= and Domains=, netplan nameservers), "
        "given to systemd-resolved for the link rather than globally.", default=None)
    rename: bool = setting(
        "With `match`: the matched link is renamed to `name` (live, by a .link file for "
        "networkd, by set-name for netplan), as netplan's set-name does. Without it the "
        "link keeps its kernel name everywhere and `name` only names the entry.",
        default=False)
    accept_ra: bool | None = setting(
        "Accept IPv6 router advertisements on this link. Default: only when IPv6 is left "
        "to DHCP. Live, accept_ra is set to 0, or to 2 (accepted although a node "
        "forwards).", default=None, key="acceptRA")
    link_local: list[Literal["ipv4", "ipv6"]] | None = setting(
        "Families given a link-local address (netplan link-local, networkd "
        "LinkLocalAddressing=): [ipv6], or [] for none (live: addr_gen_mode none). "
        "Default: networkd's, IPv6 except on a bridge port or bond member. IPv4 link-local "
        "(169.254/16) is refused: it needs networkd's IPv4LL client, which the live apply "
        "does not run.", default=None, key="linkLocal")
    ipv6_privacy: bool = setting(
        "IPv6 privacy addresses from router advertisements (RFC 8981; netplan ipv6-privacy, "
        "networkd IPv6PrivacyExtensions=yes, live use_tempaddr 2).", default=False,
        key="ipv6Privacy")
    optional: bool = setting(
        "Boot does not wait for this link (netplan optional, networkd "
        "RequiredForOnline=no); the live apply checks only gateways and the management "
        "endpoint either way.", default=False)

    def validate(self) -> Iterator[Problem]:
        if self.link_local is not None and "ipv4" in self.link_local:
            yield ("linkLocal", "ipv4 is refused: an IPv4 link-local address (169.254/16) "
                   "needs networkd's IPv4LL client, which the live apply does not run",
                   "give [ipv6] or []")
        if self.rename and self.match is None:
            yield ("rename", "renames the link `match` finds; this entry has no match",
                   "add match, or drop rename")
        for section in _SECTIONS:
            if getattr(self, section) is not None and section != self.type:
                yield (section, f"is only for type {section}, this interface is {self.type}",
                       None)
        if self.type in _SECTIONS and getattr(self, self.type) is None:
            what = "parent" if self.type in ("vlan", "macvlan") else "members"
            yield (self.type, f"is required for type {self.type}",
                   f"give {self.type}.{what}")
        if self.match is not None and self.type != "ethernet":
            yield ("match", "only ethernet interfaces are matched; others are created", None)
        if self.mtu is not None and self.mtu < IPV6_MIN_MTU and self.uses_ipv6:
            yield ("mtu", f"{self.mtu} is below {IPV6_MIN_MTU}, the least IPv6 needs (the "
                          "kernel turns IPv6 off on the link)",
                   f"raise the MTU to {IPV6_MIN_MTU} or more, or configure no IPv6 here")
        if self.bond is not None and self.bond.primary is not None \
                and self.bond.primary not in self.bond.members:
            yield ("bond.primary", f"{self.bond.primary} is not a member of the bond", None)
        yield from self._gateways()
        claimed: set[str] = set()
        for i, address in enumerate(self.addresses):
            if address.ipam is not None:
                if address.ipam.family in claimed:
                    # the claim key is Machine UID + interface + family: one address each
                    yield (f"addresses[{i}].ipam", f"a second {address.ipam.family} address "
                           "from IPAM on one interface", "claim one per family and interface")
                claimed.add(address.ipam.family)
        for i, route in enumerate(self.routes):
            if route.to == "default" and route.via is None:
                yield (f"routes[{i}].via", "a default route needs a next hop", None)
            elif route.via is not None and not route.on_link:
                yield from self._reachable(f"routes[{i}].via", route.via)

    def _gateways(self) -> Iterator[Problem]:
        if self.gateway6 is not None:
            if ipaddress.ip_address(self.gateway6).version != 6:
                yield ("gateway6", f"{self.gateway6} is not an IPv6 address", None)
            elif self.gateway is not None and ipaddress.ip_address(self.gateway).version == 6:
                yield ("gateway6", "two IPv6 gateways: `gateway` is IPv6 already",
                       "put the IPv4 gateway in `gateway`")
        for key in ("gateway", "gateway6"):
            value = getattr(self, key)
            if value is not None:
                yield from self._reachable(key, value)

    def _reachable(self, path: str, hop: str) -> Iterator[Problem]:
        """A next hop must sit in one of the interface's static subnets of its family
        (addresses from IPAM or DHCP are unknown here and checked when claimed), and the
        interface must have an address of its family at all: the kernel refuses a next
        hop it cannot reach (an IPv6 link-local one is always on the link)."""
        ip = ipaddress.ip_address(hop)
        # Each subnet with the address it comes from, as given: the user fixes one of them.
        subnets = [(a.interface.network, f"addresses[{j}].static {a.static}")
                   for j, a in enumerate(self.addresses)
                   if a.interface is not None and a.interface.version == ip.version]
        family = f"ipv{ip.version}"
        if not subnets and family not in self.dynamic_families and not ip.is_link_local:
            yield (path, f"{hop} cannot be reached: the interface has no IPv{ip.version} "
                         "address (static, IPAM or DHCP)",
                   f"give the interface an IPv{ip.version} address" +
                   (", or use the router's link-local address" if ip.version == 6 else ""))
        # a link-local next hop is on every link, whatever its global subnets (the usual
        # IPv6 gateway at hosters: fe80::1 beside a global /64)
        if subnets and not ip.is_link_local and not any(ip in net for net, _ in subnets):
            yield (path, f"{hop} is outside the interface's subnets "
                         f"({', '.join(f'{net} of {given}' for net, given in subnets)})",
                   "a gateway must be on the link; fix the address or the prefix length")
        for net, given in subnets:
            if net.version == 4 and net.prefixlen < 31 and ip in (
                    net.network_address, net.broadcast_address):
                which = "network" if ip == net.network_address else "broadcast"
                yield (path, f"{hop} is the {which} address of {net} ({given})",
                       "a gateway is a host address inside the subnet")
        if any(a.ip == ip for a in self.static_addresses):
            yield (path, f"{hop} is the interface's own address", None)

    @property
    def dynamic_families(self) -> set[str]:
        """Families whose address the interface gets from IPAM or DHCP."""
        found: set[str] = set()
        for a in self.addresses:
            found |= {a.ipam.family} if a.ipam is not None else {a.dhcp} if a.dhcp else set()
        return found

    @property
    def uses_ipv6(self) -> bool:
        """Whether the configuration gives the link anything of IPv6, which the kernel
        turns off below an MTU of 1280 (RFC 8200)."""
        hops = [self.gateway, self.gateway6, *(r.via for r in self.routes)]
        return ("ipv6" in self.dynamic_families
                or any(a.version == 6 for a in self.static_addresses)
                or any(h is not None and ":" in h for h in hops)
                or any(r.family == 6 for r in self.routes))

    @property
    def static_addresses(self) -> list[IPInterface]:
        return [a.interface for a in self.addresses if a.interface is not None]

    @property
    def parent(self) -> str | None:
        if self.vlan is not None:
            return self.vlan.parent
        return self.macvlan.parent if self.macvlan is not None else None

    @property
    def members(self) -> list[str]:
        if self.bond is not None:
            return self.bond.members
        return self.bridge.members if self.bridge is not None else []
