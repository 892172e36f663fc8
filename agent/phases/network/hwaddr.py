"""The MAC address systemd-networkd gives a bridge it creates, given to the bridge the live
apply creates: the same address on every path, and the same kernel behaviour (a bridge
created with an address has no carrier until a port is up, so an empty bridge gets no
IPv6 link-local address, as under networkd; one the kernel names itself has carrier).

networkd derives it (MACAddressPolicy=persistent, its default for bridges) from SipHash-2-4
of the machine ID followed by the link's name, under a fixed key, keeping 6 bytes, the
unicast and locally administered bits set (systemd 252, `netdev_generate_hw_addr`)."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.host import Host

NETDEV_KEY = bytes.fromhex("52e145bd006f299621c6306d83710448")
"""networkd's HASH_KEY for generated netdev addresses."""
MACHINE_ID = "/etc/machine-id"
MASK = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & MASK


def _rounds(v: list[int], n: int) -> None:
    for _ in range(n):
        v[0] = (v[0] + v[1]) & MASK
        v[1] = _rotl(v[1], 13) ^ v[0]
        v[0] = _rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & MASK
        v[3] = _rotl(v[3], 16) ^ v[2]
        v[0] = (v[0] + v[3]) & MASK
        v[3] = _rotl(v[3], 21) ^ v[0]
        v[2] = (v[2] + v[1]) & MASK
        v[1] = _rotl(v[1], 17) ^ v[2]
        v[2] = _rotl(v[2], 32)


def siphash24(key: bytes, data: bytes) -> int:
    """SipHash-2-4 (Aumasson and Bernstein, 2012) of `data` under the 16-byte `key`."""
    k0, k1 = (int(k) for k in struct.unpack("<QQ", key))
    v: list[int] = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D,
         k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]
    whole = len(data) - len(data) % 8
    last = (len(data) & 0xFF) << 56 | int.from_bytes(data[whole:], "little")
    for m in [*struct.unpack_from(f"<{whole // 8}Q", data), last]:
        v[3] ^= m
        _rounds(v, 2)
        v[0] ^= m
    v[2] ^= 0xFF
    _rounds(v, 4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def machine_id(host: Host) -> bytes:
    """The node's machine ID (16 bytes); zeros when it has none (an image tree, a test
    root): the address is then still stable, though not networkd's."""
    text = (host.read_text(MACHINE_ID) or "").strip()
    try:
        found = bytes.fromhex(text)
    except ValueError:
        found = b""
    return found if len(found) == 16 else bytes(16)


def networkd_address(machine: bytes, name: str) -> bytes:
    """The 6-byte address networkd generates for netdev `name` on machine `machine`."""
    first = bytearray(struct.pack("<Q", siphash24(NETDEV_KEY, machine + name.encode()))[:6])
    first[0] = (first[0] & 0xFE) | 0x02  # unicast, locally administered
    return bytes(first)
