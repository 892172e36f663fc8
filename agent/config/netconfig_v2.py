"""cloud-init network-config version 2 (netplan's format) translated into
`spec.network.interfaces`, as plain document values the decoder then checks like any
other. Everything v2 can say is either carried through or refused naming its v2 path;
the decoder's errors on the translated values are named by their v2 path too
(`Translation.v2_path`).

The one addition to v2 is the key `x-machine-agent` in a device: `{ipam: [...]}` lists
the addresses the device claims from IPAM pools (each `{plugin, pool, family}`, as
`spec.network.interfaces[].addresses[].ipam`). netplan refuses keys it does not know, so
a document with it is for the agent alone (docs/network-config-v2.md)."""

from __future__ import annotations

import re
from dataclasses import field
from typing import Any

from agent.recordtype import record

SECTIONS = (("ethernets", "ethernet"), ("bonds", "bond"), ("bridges", "bridge"),
            ("vlans", "vlan"))
REFUSED_SECTIONS = ("wifis", "modems", "tunnels", "vrfs", "dummy-devices",
                    "virtual-ethernets", "nm-devices", "openvswitch")
EXTENSION = "x-machine-agent"
COMMON = {"addresses", "dhcp4", "dhcp6", "gateway4", "gateway6", "mtu", "routes",
          "nameservers", "accept-ra", "renderer", "optional", "link-local", "ipv6-privacy",
          EXTENSION}
BOOLEANS = {"true": True, "yes": True, "on": True, "y": True,
            "false": False, "no": False, "off": False, "n": False}
"""The spellings netplan reads as a boolean (its parser's handle_bool), any case."""
KEYS = {"ethernet": COMMON | {"match", "set-name"},
        "bond": COMMON | {"interfaces", "parameters"},
        "bridge": COMMON | {"interfaces", "parameters"},
        "vlan": COMMON | {"id", "link"}}
BOND_PARAMETERS = {"mode": "mode", "lacp-rate": "lacpRate",
                   "transmit-hash-policy": "transmitHashPolicy",
                   "mii-monitor-interval": "miimon", "primary": "primary",
                   "up-delay": "upDelay", "down-delay": "downDelay", "min-links": "minLinks"}
BRIDGE_PARAMETERS = {"stp": "stp", "forward-delay": "forwardDelay", "priority": "priority",
                     "hello-time": "helloTime", "max-age": "maxAge"}
ROUTE_KEYS = {"to": "to", "via": "via", "metric": "metric", "table": "table",
              "on-link": "onLink"}
MATCH_KEYS = {"name": "name", "macaddress": "macAddress", "driver": "driver"}
_MS = re.compile(r"^(\d+)(ms)?$")
_SECONDS = re.compile(r"^(\d+)(s)?$")


@record
class Translation:
    interfaces: list[dict[str, Any]] = field(default_factory=list)
    problems: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(v2 path, what is wrong, hint) found while translating."""
    paths: dict[str, str] = field(default_factory=dict)
    """`interfaces[...]...` path of a translated value → its v2 path."""

    def refuse(self, path: str, message: str, hint: str | None = None) -> None:
        self.problems.append((path, message, hint))

    def v2_path(self, native: str) -> str | None:
        """The v2 path of `native` (relative to spec.network), by its longest known
        prefix; None when it is not a translated value."""
        best = ""
        for prefix in self.paths:
            if len(prefix) > len(best) and (native == prefix or native.startswith(
                    (prefix + ".", prefix + "["))):
                best = prefix
        return self.paths[best] + native[len(best):] if best else None


def translate(doc: Any, base: str = "networkConfig") -> Translation:
    """The interfaces of network-config v2 `doc` (with or without its top-level
    `network:` key); `base` is where the document sits, for paths."""
    out = Translation()
    if isinstance(doc, dict) and set(doc) == {"network"}:
        doc, base = doc["network"], f"{base}.network"
    if not isinstance(doc, dict):
        out.refuse(base, "is not a network-config v2 mapping")
        return out
    if doc.get("version") != 2:
        out.refuse(f"{base}.version", f"{doc.get('version')!r}: only version 2 is read",
                   "write the document as network-config version 2 (netplan format)")
    renderer = doc.get("renderer", "networkd")
    if renderer != "networkd":
        out.refuse(f"{base}.renderer", f"{renderer!r}: the agent writes networkd or "
                   "netplan files for systemd-networkd", "drop renderer")
    known = {"version", "renderer", *(s for s, _ in SECTIONS)}
    for key in doc:
        if key not in known:
            out.refuse(f"{base}.{key}", "is not supported by machine-agent" + (
                "" if key not in REFUSED_SECTIONS else f" ({key} cannot be configured)"))
    names = _names(doc)
    for section, kind in SECTIONS:
        entries = doc.get(section) or {}
        if not isinstance(entries, dict):
            out.refuse(f"{base}.{section}", "is not a mapping of device ids")
            continue
        for ident, entry in entries.items():
            where = f"{base}.{section}.{ident}"
            if not isinstance(entry, dict):
                out.refuse(where, "is not a mapping")
                continue
            _device(out, str(ident), kind, entry, where, names)
    return out


def _names(doc: dict[str, Any]) -> dict[str, str]:
    """Each device id → the agent's interface name: the set-name of an ethernet, else
    the id (v2 refers to devices by id; the agent by name)."""
    names: dict[str, str] = {}
    for section, _ in SECTIONS:
        entries = doc.get(section)
        for ident, entry in (entries.items() if isinstance(entries, dict) else ()):
            new = entry.get("set-name") if isinstance(entry, dict) else None
            ethernet = section == "ethernets" and isinstance(new, str)
            names[str(ident)] = new if ethernet and isinstance(new, str) else str(ident)
    return names


def _device(out: Translation, ident: str, kind: str, entry: dict[str, Any], where: str,
            names: dict[str, str]) -> None:
    index = len(out.interfaces)
    here = f"interfaces[{index}]"
    iface: dict[str, Any] = {"name": names[ident], "type": kind}
    out.paths[here] = where
    out.paths[f"{here}.name"] = f"{where}.set-name" if "set-name" in entry else where
    for key in entry:
        if key not in KEYS[kind]:
            hint = ("routing rules are not supported yet" if key == "routing-policy" else
                    None)
            out.refuse(f"{where}.{key}", "is not supported by machine-agent", hint)
    if entry.get("renderer", "networkd") != "networkd":
        out.refuse(f"{where}.renderer", f"{entry['renderer']!r}: only networkd")
    if kind == "ethernet":
        _ethernet(out, iface, entry, where, here)
    elif kind == "vlan":
        iface["vlan"] = {"id": entry.get("id"), "parent": names.get(
            str(entry.get("link")), entry.get("link"))}
        out.paths[f"{here}.vlan.id"] = f"{where}.id"
        out.paths[f"{here}.vlan.parent"] = f"{where}.link"
        out.paths[f"{here}.vlan"] = where
    else:
        _aggregate(out, iface, kind, entry, where, here, names)
    addresses: list[dict[str, Any]] = []
    for i, address in enumerate(_listed(out, entry.get("addresses"), f"{where}.addresses")):
        if isinstance(address, dict) and len(address) == 1 and \
                next(iter(address.values())) == {"lifetime": "forever"}:
            address = str(next(iter(address)))  # what an address as text means
        if not isinstance(address, str):
            out.refuse(f"{where}.addresses[{i}]", "only addresses as text (192.0.2.10/24) "
                       "or with `lifetime: forever` are supported: `lifetime: 0` "
                       "(deprecated at once) and `label` are not set live",
                       "drop lifetime and label")
            continue
        out.paths[f"{here}.addresses[{len(addresses)}]"] = f"{where}.addresses[{i}]"
        out.paths[f"{here}.addresses[{len(addresses)}].static"] = f"{where}.addresses[{i}]"
        addresses.append({"static": address})
    extension = entry.get(EXTENSION) or {}
    if not isinstance(extension, dict):
        out.refuse(f"{where}.{EXTENSION}", "is not a mapping", "give {ipam: [...]}")
        extension = {}
    for key in extension:
        if key != "ipam":
            out.refuse(f"{where}.{EXTENSION}.{key}", "unknown field", "known fields: ipam")
    for i, claim in enumerate(_listed(out, extension.get("ipam"),
                                      f"{where}.{EXTENSION}.ipam")):
        out.paths[f"{here}.addresses[{len(addresses)}]"] = f"{where}.{EXTENSION}.ipam[{i}]"
        out.paths[f"{here}.addresses[{len(addresses)}].ipam"] = \
            f"{where}.{EXTENSION}.ipam[{i}]"
        addresses.append({"ipam": claim})
    for family in ("4", "6"):
        value = boolean(entry.get(f"dhcp{family}", False))
        if value is True:
            addresses.append({"dhcp": f"ipv{family}"})
        elif value is not False:
            out.refuse(f"{where}.dhcp{family}", f"{value!r} is not true or false")
    if addresses:
        iface["addresses"] = addresses
    for v2_key, key in (("gateway4", "gateway"), ("gateway6", "gateway6"), ("mtu", "mtu"),
                        ("accept-ra", "acceptRA"), ("optional", "optional"),
                        ("link-local", "linkLocal"), ("ipv6-privacy", "ipv6Privacy")):
        if v2_key in entry:
            iface[key] = boolean(entry[v2_key]) if v2_key in (
                "accept-ra", "optional", "ipv6-privacy") else entry[v2_key]
            out.paths[f"{here}.{key}"] = f"{where}.{v2_key}"
    routes = _routes(out, entry.get("routes"), f"{where}.routes", here)
    if routes:
        iface["routes"] = routes
    _nameservers(out, iface, entry.get("nameservers"), f"{where}.nameservers", here)
    out.interfaces.append(iface)


def boolean(value: Any) -> Any:
    """`value` as netplan reads a boolean ("yes", "on", ...); anything else as it is, for
    the decoder to refuse by name."""
    return BOOLEANS.get(value.lower(), value) if isinstance(value, str) else value


def _listed(out: Translation, value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        out.refuse(where, "is not a list")
        return []
    return value


def _ethernet(out: Translation, iface: dict[str, Any], entry: dict[str, Any], where: str,
              here: str) -> None:
    match = entry.get("match")
    if match is None:
        if "set-name" in entry:
            out.refuse(f"{where}.set-name", "renames the link `match` finds; there is no "
                       "match", "add match")
        return
    if not isinstance(match, dict):
        out.refuse(f"{where}.match", "is not a mapping")
        return
    given = {}
    for key, value in match.items():
        if key not in MATCH_KEYS:
            out.refuse(f"{where}.match.{key}", "is not supported by machine-agent",
                       f"match by one of {', '.join(MATCH_KEYS)}")
            continue
        given[MATCH_KEYS[key]] = value
        out.paths[f"{here}.match.{MATCH_KEYS[key]}"] = f"{where}.match.{key}"
    out.paths[f"{here}.match"] = f"{where}.match"
    iface["match"] = given
    if "set-name" in entry:
        iface["rename"] = True
        out.paths[f"{here}.rename"] = f"{where}.set-name"


def _aggregate(out: Translation, iface: dict[str, Any], kind: str, entry: dict[str, Any],
               where: str, here: str, names: dict[str, str]) -> None:
    members = entry.get("interfaces") or []
    section: dict[str, Any] = {"members": [names.get(str(m), m) for m in members]
                               if isinstance(members, list) else members}
    out.paths[f"{here}.{kind}"] = where
    out.paths[f"{here}.{kind}.members"] = f"{where}.interfaces"
    known = BOND_PARAMETERS if kind == "bond" else BRIDGE_PARAMETERS
    parameters = entry.get("parameters") or {}
    if not isinstance(parameters, dict):
        out.refuse(f"{where}.parameters", "is not a mapping")
        parameters = {}
    for key, value in parameters.items():
        path = f"{where}.parameters.{key}"
        if key not in known:
            out.refuse(path, "is not supported by machine-agent",
                       f"supported: {', '.join(known)}")
            continue
        if key in ("mii-monitor-interval", "up-delay", "down-delay"):
            value = _number(out, path, value, _MS, "milliseconds (100 or 100ms)")
        elif key in ("forward-delay", "hello-time", "max-age"):
            value = _number(out, path, value, _SECONDS, "seconds (15 or 15s)")
        elif key == "primary":
            value = names.get(str(value), value)
        elif key == "stp":
            value = boolean(value)
        section[known[key]] = value
        out.paths[f"{here}.{kind}.{known[key]}"] = path
    iface[kind] = section


def _number(out: Translation, path: str, value: Any, unit: re.Pattern[str],
            what: str) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    found = unit.match(str(value))
    if found is None:
        out.refuse(path, f"{value!r} is not a whole number of {what}")
        return value
    return int(found.group(1))


def _routes(out: Translation, routes: Any, where: str, here: str) -> list[dict[str, Any]]:
    if routes is None:
        return []
    if not isinstance(routes, list):
        out.refuse(where, "is not a list")
        return []
    done: list[dict[str, Any]] = []
    for i, route in enumerate(routes):
        path = f"{where}[{i}]"
        if not isinstance(route, dict):
            out.refuse(path, "is not a mapping")
            continue
        native: dict[str, Any] = {}
        for key, value in route.items():
            if key == "scope":
                # the agent's scope follows the route: link without a next hop, else global
                if value != ("global" if "via" in route else "link"):
                    out.refuse(f"{path}.scope", f"{value!r}: a route "
                               f"{'with' if 'via' in route else 'without'} a next hop has "
                               f"scope {'global' if 'via' in route else 'link'}")
                continue
            if key not in ROUTE_KEYS:
                out.refuse(f"{path}.{key}", "is not supported by machine-agent",
                           f"supported: {', '.join(ROUTE_KEYS)}")
                continue
            native[ROUTE_KEYS[key]] = boolean(value) if key == "on-link" else value
            out.paths[f"{here}.routes[{len(done)}].{ROUTE_KEYS[key]}"] = f"{path}.{key}"
        if native.get("to") in ("0.0.0.0/0", "::/0") and native.get("via") is not None:
            native["to"] = "default"
        out.paths[f"{here}.routes[{len(done)}]"] = path
        done.append(native)
    return done


def _nameservers(out: Translation, iface: dict[str, Any], value: Any, where: str,
                 here: str) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        out.refuse(where, "is not a mapping")
        return
    dns: dict[str, Any] = {}
    for key, native in (("addresses", "nameservers"), ("search", "search")):
        if key in value:
            dns[native] = value[key]
            out.paths[f"{here}.dns.{native}"] = f"{where}.{key}"
    for key in value:
        if key not in ("addresses", "search"):
            out.refuse(f"{where}.{key}", "is not supported by machine-agent")
    out.paths[f"{here}.dns"] = where
    iface["dns"] = dns
