"""`spec.network`: interfaces, addresses, routes, DNS, host name, and how the live change is
proved (conflict detection, gateway and management endpoint)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

from agent.config import checks
from agent.config.fields import Duration, setting
from agent.config.interfaces import (
    DEFAULT_MTU,
    DEFAULT_ROUTE_METRIC,
    IPV6_MIN_MTU,
    RT_TABLE_MAIN,
    InterfaceSpec,
    Problem,
)
from agent.config.netconfig_v2 import translate
from agent.recordtype import record

CLOUD_INIT = "cloud-init"


def _config_source(value: str) -> str | None:
    if value == CLOUD_INIT:
        return None
    return checks.absolute_path(value)


@record(frozen=True)
class DNSSpec:
    nameservers: list[str] = setting("DNS servers, in order.", factory=list,
                                     check=checks.ip_address)
    search: list[str] = setting("Search domains.", factory=list, check=checks.fqdn)
    backend: Literal["resolved", "resolv.conf"] = setting(
        "Where DNS goes: a systemd-resolved drop-in, or /etc/resolv.conf itself.",
        default="resolved")


@record(frozen=True)
class ConflictDetectionSpec:
    arp_probes: int = setting(
        "ARP probes sent before an IPv4 address is added (RFC 5227 PROBE_NUM; 0: none).",
        default=3, check=checks.small_count, key="arpProbes")
    arp_interval: Duration = setting("Time between ARP probes (RFC 5227: 1-2s).",
                                     default=Duration(1), check=checks.positive,
                                     key="arpInterval")
    arp_wait: Duration = setting("How long to listen after the last probe (ANNOUNCE_WAIT).",
                                 default=Duration(2), check=checks.positive, key="arpWait")
    duplicate_address_detection: bool = setting(
        "Let the kernel run IPv6 DAD on new addresses and wait for it; false adds them "
        "with nodad (for segments where DAD is off, as with accept_dad=0).", default=True,
        key="duplicateAddressDetection")
    dad_timeout: Duration = setting(
        "How long to wait for IPv6 duplicate address detection.", default=Duration(5),
        check=checks.positive, key="dadTimeout")


@record(frozen=True)
class VerifySpec:
    management_endpoint: str | None = setting(
        "host:port that must accept a TCP connection over the new configuration. Default: "
        "the host and port of spec.management.server; none when neither is set.",
        default=None, check=checks.host_port)
    timeout: Duration = setting("How long each check (gateway, management) may take before "
                                "the change is rolled back.", default=Duration(10),
                                check=checks.positive)


@record(frozen=True)
class NetworkSpec:
    renderer: Literal["networkd", "netplan", "none"] = setting(
        "Which persistent configuration to write; chosen by name, never probed.",
        default="networkd")
    interfaces: list[InterfaceSpec] = setting("Interfaces the agent configures.", factory=list)
    drift: Literal["repair", "report"] = setting(
        "What the daemon does when a link, address or route it configured is changed by "
        "hand (it hears the kernel's netlink announcements; no polling): `repair` applies "
        "the configuration again, `report` leaves it and sets ConfigurationDrift False "
        "(reason Drifted); both with an Event.", default="repair")
    hostname: str | None = setting("Host name (FQDN) for /etc/hostname and /etc/hosts.",
                                   default=None, check=checks.fqdn)
    dns: DNSSpec = setting("Name servers and search domains.", factory=DNSSpec)
    conflict_detection: ConflictDetectionSpec = setting(
        "Probing for addresses already in use before keeping them.",
        factory=ConflictDetectionSpec)
    verify: VerifySpec = setting("What proves the new configuration before it is kept.",
                                 factory=VerifySpec)
    disable_cloud_init_network: bool = setting(
        "Stop cloud-init from writing its own network configuration (when the agent "
        "configures interfaces and renders them; never with networkConfigFrom: "
        "cloud-init, whose document cloud-init must hand out).", default=True,
        key="disableCloudInitNetwork")
    network_config: dict[str, Any] | None = setting(
        "A cloud-init network-config version 2 document (netplan's format), as it is: "
        "its devices become `interfaces`, and errors name their v2 path. See "
        "docs/network-config-v2.md.", default=None, key="networkConfig")
    network_config_from: str | None = setting(
        "Where `networkConfig` is read from: an absolute path of a v2 file, or "
        "`cloud-init` for the datasource's own (/run/cloud-init/network-config.json, "
        "cloud-init 23.4 or later).", default=None, key="networkConfigFrom",
        check=_config_source)

    @classmethod
    def prepare_document(cls, value: dict[str, Any]) -> tuple[
            dict[str, Any], Callable[[str], str | None] | None, list[Problem]]:
        """`networkConfig` (v2) translated into `interfaces` (fields.Decoder hook)."""
        if value.get("networkConfig") is None:
            return value, None, []
        translation = translate(value["networkConfig"])
        problems: list[Problem] = [(p, m, h) for p, m, h in translation.problems]
        if value.get("interfaces"):
            problems.append(("interfaces", "is given with networkConfig",
                             "give the interfaces in one of them"))
        return {**value, "interfaces": translation.interfaces}, translation.v2_path, \
            problems

    def validate(self) -> Iterator[Problem]:
        by_name: dict[str, int] = {}
        for i, iface in enumerate(self.interfaces):
            if iface.name in by_name:
                yield (f"interfaces[{i}].name",
                       f"{iface.name} is also interfaces[{by_name[iface.name]}]", None)
            by_name.setdefault(iface.name, i)
        yield from self._references(by_name)
        yield from self._same_link()
        yield from self._addresses()
        yield from self._default_routes()
        if self.renderer == "netplan":
            for i, iface in enumerate(self.interfaces):
                if iface.type == "macvlan":
                    yield (f"interfaces[{i}].type", "netplan cannot describe a macvlan",
                           "use renderer networkd")
                if iface.vlan is not None and iface.vlan.protocol == "802.1ad":
                    yield (f"interfaces[{i}].vlan.protocol",
                           "netplan cannot describe an 802.1ad VLAN", "use renderer networkd")
        servers = list(self.dns.nameservers)
        for iface in self.interfaces:  # per-link servers join them in /etc/resolv.conf
            servers += [s for s in (iface.dns.nameservers if iface.dns else [])
                        if s not in servers]
        if self.dns.backend == "resolv.conf" and len(servers) > 3:
            # glibc reads at most MAXNS (3) nameserver lines; the rest would be ignored.
            yield ("dns.nameservers", f"{len(servers)} servers (with the interfaces' "
                   "own), but /etc/resolv.conf holds at most 3",
                   "use backend resolved, or fewer")

    def _references(self, by_name: dict[str, int]) -> Iterator[Problem]:
        owner: dict[str, str] = {}
        for i, iface in enumerate(self.interfaces):
            here = f"interfaces[{i}]"
            parent = iface.parent
            if parent is not None:
                section = f"{here}.{iface.type}.parent"
                if parent not in by_name:
                    yield (section, f"{parent} is not an interface entry",
                           f"add an entry named {parent}")
                elif parent == iface.name:
                    yield (section, "an interface cannot be its own parent", None)
                else:
                    yield from self._vlan_mtu(here, iface, self.interfaces[by_name[parent]])
            for j, member in enumerate(iface.members):
                path = f"{here}.{iface.type}.members[{j}]"
                if member not in by_name:
                    yield (path, f"{member} is not an interface entry",
                           f"add an entry named {member}")
                elif member in owner:
                    yield (path, f"{member} is already a member of {owner[member]}",
                           "a link can be enslaved to one bond or bridge only")
                else:
                    owner[member] = iface.name
                if member in by_name and self.interfaces[by_name[member]].addresses:
                    yield (path, f"{member} has addresses; a member carries none",
                           f"move them to {iface.name}")
                if member in by_name:
                    yield from self._member_mtu(here, iface, by_name[member],
                                                self.interfaces[by_name[member]])

    @staticmethod
    def _member_mtu(here: str, master: InterfaceSpec, index: int,
                    member: InterfaceSpec) -> Iterator[Problem]:
        """One MTU on every path: enslaving gives a bond's members the bond's MTU, and a
        bridge whose MTU was not set by netlink (networkd's .netdev) follows its smallest
        port, so a member's own MTU would hold live and not after a reboot, or the
        other way round."""
        master_mtu, member_mtu = master.mtu or DEFAULT_MTU, member.mtu or DEFAULT_MTU
        if master.type == "bond" and member.mtu is not None and member_mtu != master_mtu:
            yield (f"interfaces[{index}].mtu",
                   f"{member_mtu} differs from the MTU of its bond {master.name} "
                   f"({master_mtu}): the kernel gives a bond's members the bond's MTU",
                   f"give {master.name} mtu {member_mtu}, or drop this one")
        # Below its ports too: networkd sets a bridge's MTU when it creates it, before
        # the ports join, and the kernel then moves it to theirs (only an MTU changed
        # after creation sticks, which is what the live apply does), so the bridge would
        # have its own MTU live and its ports' after a reboot.
        if master.type == "bridge" and master.mtu is not None and master_mtu != member_mtu:
            side = "above" if master_mtu > member_mtu else "below"
            yield (f"{here}.mtu", f"{master_mtu} is {side} the MTU of its member "
                                  f"{member.name} ({member_mtu}): a bridge takes its ports' "
                                  "MTU when they join",
                   f"give {member.name} mtu {master_mtu}, or "
                   f"{'lower' if side == 'above' else 'raise'} this one")

    @staticmethod
    def _vlan_mtu(here: str, vlan: InterfaceSpec, parent: InterfaceSpec) -> Iterator[Problem]:
        parent_mtu = parent.mtu or DEFAULT_MTU
        if vlan.mtu is not None and vlan.mtu > parent_mtu:
            yield (f"{here}.mtu", f"{vlan.mtu} is above the MTU of its parent {parent.name} "
                                  f"({parent_mtu})", "raise the parent's MTU or lower this one")
        if vlan.mtu is None and parent_mtu < IPV6_MIN_MTU and vlan.uses_ipv6:
            yield (f"{here}.mtu", f"the {vlan.type} takes the MTU of {parent.name} "
                                  f"({parent_mtu}), "
                                  f"below the {IPV6_MIN_MTU} IPv6 needs",
                   f"raise the MTU of {parent.name} to {IPV6_MIN_MTU} or more")

    def _same_link(self) -> Iterator[Problem]:
        """Two ethernet entries must not select one link: both would configure it (a
        re-run would take each one's addresses away for the other's) and two .network
        files would match it, of which networkd applies one. What only the host can
        tell (one entry by MAC, another by name) is refused when the names are
        resolved."""
        seen: dict[tuple[str, str], int] = {}
        for i, iface in enumerate(self.interfaces):
            if iface.type != "ethernet":
                continue
            match = iface.match
            if match is not None and match.mac_address is not None:
                key, path = ("MAC address", match.mac_address.lower()), "match.macAddress"
            elif match is not None and match.driver is not None:
                key, path = ("driver", match.driver), "match.driver"
            else:
                name = match.name if match is not None and match.name else iface.name
                key, path = ("name", name), "match.name" if match is not None else "name"
            if key in seen:
                other = self.interfaces[seen[key]].name
                yield (f"interfaces[{i}].{path}",
                       f"{iface.name} selects the link of {key[0]} {key[1]}, as "
                       f"interfaces[{seen[key]}] ({other}) does",
                       "one entry per link: merge the two entries")
            seen.setdefault(key, i)

    def _default_routes(self) -> Iterator[Problem]:
        """One default route per family, table and metric: a second is refused by the
        kernel live (it exists already) while networkd, whose routes are keyed without
        the next hop's link, keeps one of the two, so the node's way out would differ
        by path. Gateways from IPAM are checked when claimed."""
        seen: dict[tuple[int, int, int], str] = {}
        for i, iface in enumerate(self.interfaces):
            here = f"interfaces[{i}]"
            hops: list[tuple[str, str, int, int | None]] = [
                (f"{here}.{key}", gw, RT_TABLE_MAIN, None)
                for key in ("gateway", "gateway6")
                if (gw := getattr(iface, key)) is not None]
            hops += [(f"{here}.routes[{j}]", r.via, r.table or RT_TABLE_MAIN, r.metric)
                     for j, r in enumerate(iface.routes)
                     if r.to == "default" and r.via is not None]
            for path, via, table, metric in hops:
                family = ipaddress.ip_address(via).version
                key = (family, table, metric if metric is not None else
                       DEFAULT_ROUTE_METRIC[family])
                if key in seen:
                    yield (path, f"a second IPv{family} default route in table {table} "
                                 f"with metric {key[2]}, as {seen[key]}",
                           "give one of them another metric or table, or drop it")
                    continue
                seen[key] = path

    def _addresses(self) -> Iterator[Problem]:
        """Each static address once, and no subnet overlapping another link's: for every
        address, the first earlier one (in the configuration's order) on another link
        whose subnet overlaps it. Two CIDR blocks overlap only when one holds the other,
        so the earlier subnets that overlap are found by lookups at the prefix lengths
        the configuration uses (not by comparing every pair: 10,000 addresses took 12 s)."""
        lengths: dict[int, set[int]] = {}
        for iface in self.interfaces:
            for spec in iface.addresses:
                if spec.interface is not None:
                    net = spec.interface.network
                    lengths.setdefault(net.version, set()).add(net.prefixlen)
        used = {version: sorted(found) for version, found in lengths.items()}
        seen_ip: dict[str, str] = {}
        same: dict[tuple[int, int, int], list[_Earlier]] = {}
        """Earlier subnets that are exactly the block (version, prefix length, bits)."""
        inside: dict[tuple[int, int, int], list[_Earlier]] = {}
        """Earlier subnets strictly inside the block."""
        order = 0
        for i, iface in enumerate(self.interfaces):
            for j, spec in enumerate(iface.addresses):
                addr = spec.interface
                if addr is None:
                    continue
                path = f"interfaces[{i}].addresses[{j}].static"
                ip = str(addr.ip)
                if ip in seen_ip:
                    yield (path, f"{ip} is also {seen_ip[ip]}", "each address once")
                    continue
                seen_ip[ip] = path
                net = addr.network
                version, size, length = net.version, net.max_prefixlen, net.prefixlen
                value = int(net.network_address)
                keys = [(same, (version, q, value >> (size - q)))
                        for q in used[version] if q <= length]
                keys.append((inside, (version, length, value >> (size - length))))
                found: _Earlier | None = None
                for table, key in keys:
                    other = _first_not_on(table.get(key, ()), iface.name)
                    if other is not None and (found is None or other.order < found.order):
                        found = other
                if found is not None:
                    yield (path, f"{net} overlaps {found.net} of {found.iface} "
                                 f"({found.path})",
                           "one subnet per link; routing between them is ambiguous")
                entry = _Earlier(order, net, iface.name, path)
                _remember(same, (version, length, value >> (size - length)), entry)
                for q in used[version]:
                    if q < length:
                        _remember(inside, (version, q, value >> (size - q)), entry)
                order += 1


@record(frozen=True)
class _Earlier:
    order: int
    net: ipaddress.IPv4Network | ipaddress.IPv6Network
    iface: str
    path: str


def _remember(table: dict[tuple[int, int, int], list[_Earlier]], key: tuple[int, int, int],
              entry: _Earlier) -> None:
    """Keep, per block, the first entry and the first on another link than that one's:
    enough to answer "the first not on link X" for any X."""
    kept = table.setdefault(key, [])
    if not kept or (len(kept) == 1 and kept[0].iface != entry.iface):
        kept.append(entry)


def _first_not_on(kept: Sequence[_Earlier], iface: str) -> _Earlier | None:
    return next((e for e in kept if e.iface != iface), None)
