"""RTM_NEWLINK requests that create a bond, VLAN, bridge or macvlan: IFLA_LINKINFO with
IFLA_INFO_KIND and the kind's IFLA_INFO_DATA, encoded as iproute2 encodes
`ip link add NAME [link PARENT] type KIND ...` (same attributes, same order: the tests
hold the bytes equal to what `ip` sends). Values are the kernel's numbers, never the
names a user writes: the names are mapped here, once."""

from __future__ import annotations

import struct

from agent.netlink.rtnl import IFINFOMSG, NLM_F_CREATE, NLM_F_EXCL, RTM_NEWLINK, Request, attr

IFLA_ADDRESS, IFLA_IFNAME, IFLA_LINK, IFLA_LINKINFO = 1, 3, 5, 18
IFLA_INFO_KIND, IFLA_INFO_DATA = 1, 2

IFLA_BOND_MODE, IFLA_BOND_MIIMON, IFLA_BOND_PRIMARY = 1, 3, 11
IFLA_BOND_XMIT_HASH_POLICY, IFLA_BOND_AD_LACP_RATE = 14, 21
IFLA_VLAN_ID, IFLA_VLAN_PROTOCOL = 1, 5
IFLA_BR_FORWARD_DELAY, IFLA_BR_STP_STATE = 1, 5
IFLA_MACVLAN_MODE = 1

BOND_MODES = {"balance-rr": 0, "active-backup": 1, "balance-xor": 2, "broadcast": 3,
              "802.3ad": 4, "balance-tlb": 5, "balance-alb": 6}
"""include/uapi/linux/if_bonding.h BOND_MODE_*."""
XMIT_HASH_POLICIES = {"layer2": 0, "layer3+4": 1, "layer2+3": 2, "encap2+3": 3,
                      "encap3+4": 4, "vlan+srcmac": 5}
"""BOND_XMIT_POLICY_*."""
LACP_RATES = {"slow": 0, "fast": 1}
VLAN_PROTOCOLS = {"802.1q": 0x8100, "802.1ad": 0x88A8}
"""Ethertypes, sent in network byte order."""
MACVLAN_MODES = {"private": 1, "vepa": 2, "bridge": 4, "passthru": 8, "source": 16}
USER_HZ = 100
"""The bridge's times are clock_t (centiseconds) on the netlink side."""


def u8(kind: int, value: int) -> bytes:
    return attr(kind, struct.pack("=B", value))


def u16(kind: int, value: int) -> bytes:
    return attr(kind, struct.pack("=H", value))


def be16(kind: int, value: int) -> bytes:
    return attr(kind, struct.pack(">H", value))


def u32(kind: int, value: int) -> bytes:
    return attr(kind, struct.pack("=I", value))


def bond_data(mode: str, *, miimon: int | None = None, primary: int | None = None,
              lacp_rate: str | None = None, xmit_hash_policy: str | None = None) -> bytes:
    """IFLA_INFO_DATA of a bond; `primary` is the index of the preferred member (the
    kernel records it by name and applies it once the member is enslaved)."""
    data = u8(IFLA_BOND_MODE, BOND_MODES[mode])
    if miimon is not None:
        data += u32(IFLA_BOND_MIIMON, miimon)
    if primary is not None:
        data += u32(IFLA_BOND_PRIMARY, primary)
    if lacp_rate is not None:
        data += u8(IFLA_BOND_AD_LACP_RATE, LACP_RATES[lacp_rate])
    if xmit_hash_policy is not None:
        data += u8(IFLA_BOND_XMIT_HASH_POLICY, XMIT_HASH_POLICIES[xmit_hash_policy])
    return data


def vlan_data(vlan_id: int, protocol: str | None = None) -> bytes:
    data = u16(IFLA_VLAN_ID, vlan_id)
    if protocol is not None:
        data += be16(IFLA_VLAN_PROTOCOL, VLAN_PROTOCOLS[protocol])
    return data


def bridge_data(*, forward_delay: float | None = None, stp: bool | None = None) -> bytes:
    """`forward_delay` in seconds (as netplan and networkd write it)."""
    data = b""
    if forward_delay is not None:
        data += u32(IFLA_BR_FORWARD_DELAY, round(forward_delay * USER_HZ))
    if stp is not None:
        data += u32(IFLA_BR_STP_STATE, 1 if stp else 0)
    return data


def macvlan_data(mode: str) -> bytes:
    return u32(IFLA_MACVLAN_MODE, MACVLAN_MODES[mode])


def new_link(name: str, kind: str, data: bytes = b"", parent: int | None = None,
             address: bytes | None = None) -> Request:
    """The request that creates link `name` of `kind` (riding on link index `parent`,
    for a VLAN or macvlan; with MAC `address`, else the kernel's); it fails with EEXIST
    when the name is taken."""
    body = IFINFOMSG.pack(0, 0, 0, 0, 0)
    if parent is not None:
        body += u32(IFLA_LINK, parent)
    if address is not None:
        body += attr(IFLA_ADDRESS, address)
    body += attr(IFLA_IFNAME, name.encode() + b"\0")
    info = attr(IFLA_INFO_KIND, kind.encode())  # no NUL, as iproute2 sends it
    if data:
        info += attr(IFLA_INFO_DATA, data)
    body += attr(IFLA_LINKINFO, info)
    return Request(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, body)
