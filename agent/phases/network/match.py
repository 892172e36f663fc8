"""Which kernel link each planned interface is: by name, MAC address or driver."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.errors import PermanentError, Reason
from agent.netlink.observe import Observed, link_driver
from agent.phases.network.model import LinkPlan, NetworkPlan

CREATED_KINDS = frozenset({"bond", "bridge", "vlan", "macvlan"})
"""Kinds of link the agent creates: never the NIC an entry matches."""

if TYPE_CHECKING:
    from agent.host import Host


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
                                 reason=Reason.InterfaceNotFound, hint=_hint(link, now))
        names[link.name] = found[0]
    taken: dict[str, str] = {}
    for link in plan.links:
        other = taken.setdefault(names[link.name], link.name)
        if other != link.name:
            raise PermanentError(
                f"interfaces {other} and {link.name} both select link {names[link.name]} "
                f"({_criterion(plan.link(other))}; {_criterion(link)})",
                reason=Reason.InterfaceNotFound,
                hint="one entry per link: merge the two entries, or match the other link")
    return names


def _hint(link: LinkPlan, now: Observed) -> str | None:
    current = sorted(s.name for s in now.links if link.match_mac and s.mac == link.match_mac)
    # Not matched by its current address on purpose: the files say PermanentMACAddress=
    # (netplan's too), so after a reboot networkd would not find it either.
    bare = sorted(s.name for s in now.links if s.name in current and not s.perm_mac
                  and s.kind not in CREATED_KINDS)
    if bare:
        return (f"{', '.join(bare)} carry {link.match_mac} but have no permanent MAC "
                "address (a veth, some virtual NICs), which is what a MAC match uses, as "
                "networkd's PermanentMACAddress= and netplan's match.macaddress: match "
                "such a link by name (match.name) instead")
    if current:
        return (f"{', '.join(current)} carry {link.match_mac} as their current address "
                "only; a MAC match is on the permanent address of a NIC, as networkd's "
                "PermanentMACAddress= and netplan's match.macaddress")
    return None


def _criterion(link: LinkPlan) -> str:
    if link.match_mac:
        return f"permanent MAC address {link.match_mac}"
    if link.match_driver:
        return f"driver {link.match_driver}"
    return f"name {link.match_name or link.name}"


def _matching(host: Host, link: LinkPlan, now: Observed,
              drivers: dict[str, str | None]) -> list[str]:
    if link.match_mac:
        # never the current address: a bridge or bond takes a member's, a VLAN its
        # parent's, and one NIC would match several links
        return [s.name for s in now.links if s.perm_mac == link.match_mac]
    if link.match_driver:
        for s in now.links:
            if s.name not in drivers:
                drivers[s.name] = link_driver(host, s.name)
        return [s.name for s in now.links if drivers[s.name] == link.match_driver]
    found = now.link(link.match_name or link.name)  # indexed: names are unique
    if found is None and link.rename:  # renamed by an earlier run (or at boot)
        found = now.link(link.name)
        found = found if found is not None and found.kind not in CREATED_KINDS else None
    return [found.name] if found is not None else []
