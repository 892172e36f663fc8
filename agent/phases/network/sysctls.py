"""Per-link IPv6 settings the live apply makes through /proc/sys, before a link goes up
(nothing is taken in between): accept_ra, whether the link has a link-local address
(addr_gen_mode), privacy addresses (use_tempaddr); and what a rollback sets back. Each is
what networkd makes of the same files: the real-networkd differential tests compare them."""

from __future__ import annotations

from agent.netlink.observe import LinkState
from agent.phases.network.model import LinkPlan, NetworkPlan

ACCEPT_RA_ON = 2
"""accept_ra when advertisements are wanted: 2 accepts them although the node forwards
(a Kubernetes node does); networkd handles them itself and leaves the kernel's at 0."""
ADDR_GEN_EUI64, ADDR_GEN_NONE = 0, 1
USE_TEMPADDR_PREFERRED = 2
"""Privacy addresses made and preferred (networkd's IPv6PrivacyExtensions=yes)."""

Setting = tuple[str, int]


def wanted(link: LinkPlan, plan: NetworkPlan, state: LinkState | None) -> list[Setting]:
    """The settings `link` lacks in `state` (None: a link about to be made). A link
    without IPv6 (the kernel's or its own is off) reads None and has nothing to set."""
    out: list[Setting] = []
    if link.accept_ra is not None:
        value = ACCEPT_RA_ON if link.accept_ra else 0
        if state is None or state.accept_ra not in (None, value):
            out.append(("accept_ra", value))
    mode = _addr_gen_mode(link, plan)
    if mode is not None and (state is None or state.addr_gen_mode not in (None, mode)):
        out.append(("addr_gen_mode", mode))
    if link.ipv6_privacy and (state is None or state.use_tempaddr not in (
            None, USE_TEMPADDR_PREFERRED)):
        out.append(("use_tempaddr", USE_TEMPADDR_PREFERRED))
    return out


def _addr_gen_mode(link: LinkPlan, plan: NetworkPlan) -> int | None:
    """No link-local address on a bridge port or bond member (networkd's default there:
    LinkLocalAddressing=no) or where `link-local` lists no ipv6; one where it lists ipv6;
    otherwise the kernel's choice stands."""
    if link.master is not None and plan.link(link.master).kind in ("bridge", "bond"):
        return ADDR_GEN_NONE
    if link.link_local is None:
        return None
    return ADDR_GEN_EUI64 if "ipv6" in link.link_local else ADDR_GEN_NONE


def restore(was: LinkState, state: LinkState) -> list[Setting]:
    """The settings that differ from the snapshot `was`, set back."""
    return [(key, before) for key in ("accept_ra", "addr_gen_mode", "use_tempaddr")
            if (before := getattr(was, key)) is not None
            and getattr(state, key) not in (None, before)]
