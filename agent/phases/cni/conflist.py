"""The network configuration list: rendered from a template or given inline, and checked
against the node before it is written (plugins present, IPAM ranges sound and clear of
the node's own networks)."""

from __future__ import annotations

import copy
import ipaddress
import json
from collections.abc import Iterable, Iterator
from dataclasses import field
from typing import Any

from agent import templating
from agent.config import AgentConfig
from agent.config.cni import ConflistSpec, conflist_shape
from agent.errors import PermanentError, Reason
from agent.recordtype import record

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class ConflistError(PermanentError):
    """The conflist would not work on this node; nothing was written."""

    reason = Reason.CNIBroken


def render(spec: ConflistSpec) -> dict[str, Any]:
    """The conflist as a document: the inline one, or the named template rendered."""
    if spec.inline is not None:
        return copy.deepcopy(spec.inline)
    assert spec.template is not None  # the config requires one of inline or template
    text = templating.render(f"cni/{spec.template}.conflist.j2", v=spec.values)
    doc: dict[str, Any] = json.loads(text)
    return doc


def to_text(doc: dict[str, Any]) -> str:
    """The file's content: stable, indented JSON."""
    return json.dumps(doc, indent=2) + "\n"


@record(frozen=True)
class IPRange:
    """One host-local range, located by its path in the conflist."""

    where: str
    subnet: Network
    start: Address | None = None
    end: Address | None = None
    gateway: Address | None = None

    def contains(self, address: Address) -> bool:
        if address not in self.subnet:
            return False
        # Same family as the subnet from here on: compare as integers.
        return ((self.start is None or int(address) >= int(self.start))
                and (self.end is None or int(address) <= int(self.end)))


@record
class Findings:
    problems: list[str] = field(default_factory=list)
    ranges: list[IPRange] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Plugin binaries not in binDir."""
    overlap: bool = False
    """A pod range overlaps the node's own networks."""


def plugin_types(doc: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(path, binary name) of every plugin the list runs: the plugins, their IPAM
    plugins, and what a delegating plugin (flannel) hands on to."""
    for i, plugin in enumerate(doc.get("plugins") or []):
        if not isinstance(plugin, dict):
            continue
        where = f"plugins[{i}]"
        if isinstance(plugin.get("type"), str):
            yield f"{where}.type", plugin["type"]
        for sub, conf in _ipam_holders(plugin, where):
            ipam = conf.get("ipam")
            if isinstance(ipam, dict) and isinstance(ipam.get("type"), str):
                yield f"{sub}.ipam.type", ipam["type"]
        if plugin.get("type") == "flannel":
            # flannel delegates to bridge unless told otherwise (flannel-io/cni-plugin
            # flannel_linux.go: delegate["type"] defaults to "bridge"), with host-local.
            delegate = plugin.get("delegate") or {}
            yield f"{where}.delegate.type", str(delegate.get("type", "bridge"))
            yield f"{where}.delegate.ipam.type", "host-local"


def _ipam_holders(plugin: dict[str, Any], where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield where, plugin
    if isinstance(plugin.get("delegate"), dict):
        yield f"{where}.delegate", plugin["delegate"]


def own_links(doc: dict[str, Any]) -> set[str]:
    """The bridges the list's plugins make on the node (the bridge plugin's `bridge`,
    default cni0; flannel delegates to bridge unless told otherwise): their addresses
    are the list's own, not the node's."""
    out = set()
    for i, plugin in enumerate(doc.get("plugins") or []):
        if not isinstance(plugin, dict):
            continue
        for _, conf in _ipam_holders(plugin, f"plugins[{i}]"):
            default = "bridge" if conf is not plugin and plugin.get("type") == "flannel" else None
            if conf.get("type", default) == "bridge":
                out.add(str(conf.get("bridge") or "cni0"))
    return out


def examine(doc: dict[str, Any], bin_dir: str, executables: set[str],
            node_networks: Iterable[tuple[str, Network]],
            live: Iterable[tuple[str, str]] = ()) -> Findings:
    """Every problem of the conflist on this node, and its host-local ranges. `live`:
    (link, address/prefix) of the global addresses the node's namespace has now."""
    found = Findings()
    found.problems += [f"{path or '(list)'}: {msg}" + (f" ({hint})" if hint else "")
                       for path, msg, hint in conflist_shape(doc)]
    for path, name in plugin_types(doc):
        if name not in executables:
            found.missing.append(name)
            found.problems.append(f"{path}: plugin {name!r} is not an executable in {bin_dir}")
    for i, plugin in enumerate(doc.get("plugins") or []):
        if isinstance(plugin, dict):
            for sub, conf in _ipam_holders(plugin, f"plugins[{i}]"):
                ipam = conf.get("ipam")
                if isinstance(ipam, dict) and ipam.get("type") == "host-local":
                    _ranges(ipam, f"{sub}.ipam", found)
    for i, a in enumerate(found.ranges):
        for b in found.ranges[i + 1:]:
            if a.subnet.overlaps(b.subnet):
                found.problems.append(f"{b.where}: {b.subnet} overlaps {a.subnet} at {a.where}")
    networks = list(node_networks)
    for origin, net in networks + _live_networks(doc, found.ranges, networks, live):
        for r in found.ranges:
            if r.subnet.overlaps(net):
                found.overlap = True
                found.problems.append(
                    f"{r.where}: pod range {r.subnet} overlaps the node's own network "
                    f"{net} ({origin}); pods would shadow the node's addresses")
    return found


def _live_networks(doc: dict[str, Any], ranges: list[IPRange],
                   known: list[tuple[str, Network]], live: Iterable[tuple[str, str]]
                   ) -> list[tuple[str, Network]]:
    """The networks of the node's live addresses not already known from the config,
    leaving out what the list's plugins put there themselves: addresses on its bridges,
    and a range's gateway as a host address (ptp puts it on each pod's host veth)."""
    own = own_links(doc)
    gateways = {r.gateway or r.subnet.network_address + 1 for r in ranges}
    seen = {net for _, net in known}
    out: list[tuple[str, Network]] = []
    for link, text in live:
        addr = ipaddress.ip_interface(text)
        if (link in own or addr.network in seen
                or (addr.network.prefixlen == addr.max_prefixlen and addr.ip in gateways)):
            continue
        seen.add(addr.network)
        out.append((f"address {addr} on {link}", addr.network))
    return out


def _ranges(ipam: dict[str, Any], where: str, found: Findings) -> None:
    """host-local's ranges: `ranges` (a list of range sets) or the legacy single range."""
    sets = ipam.get("ranges")
    if sets is None:
        if "subnet" in ipam:
            _one_range(ipam, where, found)
        return
    if not isinstance(sets, list) or not all(isinstance(s, list) for s in sets):
        found.problems.append(f"{where}.ranges: must be a list of lists of ranges")
        return
    for i, rset in enumerate(sets):
        for j, rng in enumerate(rset):
            if not isinstance(rng, dict):
                found.problems.append(f"{where}.ranges[{i}][{j}]: must be a mapping")
                continue
            _one_range(rng, f"{where}.ranges[{i}][{j}]", found)


def _one_range(rng: dict[str, Any], where: str, found: Findings) -> None:
    try:
        subnet = ipaddress.ip_network(str(rng.get("subnet")), strict=False)
    except ValueError:
        found.problems.append(f"{where}.subnet: {rng.get('subnet')!r} is not a network "
                              "(e.g. 198.51.100.0/24)")
        return
    # host-local refuses networks with fewer than two host bits (plugins/ipam/host-local
    # backend/allocator/range.go: "Network %s too small to allocate from").
    if subnet.max_prefixlen - subnet.prefixlen < 2:
        found.problems.append(f"{where}.subnet: {subnet} is too small to allocate from")
        return
    bounds: dict[str, Address | None] = {}
    for key in ("rangeStart", "rangeEnd", "gateway"):
        bounds[key] = None
        if rng.get(key) is None:
            continue
        try:
            addr = ipaddress.ip_address(str(rng[key]))
        except ValueError:
            found.problems.append(f"{where}.{key}: {rng[key]!r} is not an IP address")
            continue
        if addr not in subnet:
            found.problems.append(f"{where}.{key}: {addr} is outside the subnet {subnet}")
            continue
        bounds[key] = addr
    start, end = bounds["rangeStart"], bounds["rangeEnd"]
    if start is not None and end is not None and int(start) > int(end):
        found.problems.append(f"{where}: rangeStart {start} is after rangeEnd {end}")
    found.ranges.append(IPRange(where, subnet, start, end, bounds["gateway"]))


def node_networks(config: AgentConfig, applied: dict[str, list[str]]
                  ) -> list[tuple[str, Network]]:
    """The node's own networks: static addresses in spec.network, and the addresses
    earlier phases put on the node's links (`applied`: interface → `address/prefix`
    strings; the network phase's include addresses claimed from IPAM)."""
    out: list[tuple[str, Network]] = []
    for i, iface in enumerate(config.spec.network.interfaces):
        for j, addr in enumerate(iface.addresses):
            if addr.static is not None:
                out.append((f"spec.network.interfaces[{i}].addresses[{j}]",
                            ipaddress.ip_interface(addr.static).network))
    for link, addresses in sorted(applied.items()):
        for text in addresses:
            try:
                net = ipaddress.ip_interface(str(text)).network
            except ValueError:
                continue  # not an address: nothing this check can use
            out.append((f"network phase, {link}", net))
    return out
