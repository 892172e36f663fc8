"""Which kernel link each planned interface is: by name, MAC address or driver."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.errors import PermanentError, Reason
from agent.netlink.observe import Observed, link_driver
from agent.phases.network.model import LinkPlan, NetworkPlan

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
    found = now.link(link.match_name or link.name)  # indexed: names are unique
    return [found.name] if found is not None else []
