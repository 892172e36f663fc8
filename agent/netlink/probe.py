"""Is an address already in use on the segment? IPv4: ARP probes as in RFC 5227 section
2.1 (sender address 0.0.0.0, so no neighbour cache is disturbed), sent for every new
address at once and answered within one probe window. IPv6: the kernel's duplicate
address detection, where `dadfailed` means another node holds the address."""

from __future__ import annotations

import ipaddress
import select
import socket
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from agent.config.network import ConflictDetectionSpec
from agent.netlink.observe import IFA_ADDRESS, addr_dump
from agent.netlink.rtnl import IFADDRMSG, U32, attributes, ip_text

if TYPE_CHECKING:
    from agent.host import Host
    from agent.netlink.rtnl import Rtnl

ETH_P_ARP = 0x0806
PACKET_OUTGOING = 4
ARP_REQUEST = 1
IFA_FLAGS = 8
IFA_F_DADFAILED = 0x08
IFA_F_TENTATIVE = 0x40
BROADCAST = b"\xff" * 6


def arp_probe_frame(mac: bytes, target: str) -> bytes:
    """An ARP probe: a request from sender 0.0.0.0 for `target` (RFC 5227 2.1.1)."""
    header = BROADCAST + mac + struct.pack("!H", ETH_P_ARP)
    arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, ARP_REQUEST, mac, bytes(4),
                      bytes(6), ipaddress.IPv4Address(target).packed)
    return header + arp


def claimed_by_other(frame: bytes, own_mac: bytes, targets: set[str]) -> str | None:
    """The target this ARP frame shows another host using: a reply or request from it,
    or another host's probe for the same address (RFC 5227 2.1.1)."""
    if len(frame) < 42 or struct.unpack("!H", frame[12:14])[0] != ETH_P_ARP:
        return None
    sha, spa, tpa = frame[22:28], frame[28:32], frame[38:42]
    if sha == own_mac:
        return None
    sender, target = str(ipaddress.IPv4Address(spa)), str(ipaddress.IPv4Address(tpa))
    if sender in targets:
        return sender
    if sender == "0.0.0.0" and target in targets:
        return target
    return None


def arp_conflicts(host: Host, candidates: Sequence[tuple[str, str, str]],
                  spec: ConflictDetectionSpec, monotonic: Callable[[], float]) -> set[str]:
    """Of the (link, MAC, IPv4 address) candidates, the addresses another host answers
    for. Probes for every candidate go out together, `arpProbes` times `arpInterval`
    apart; the last is followed by `arpWait` of listening. Bounded by those settings."""
    if not candidates or spec.arp_probes == 0:
        return set()
    sockets: dict[str, tuple[socket.socket, bytes, set[str]]] = {}
    try:
        for link, mac, ip in candidates:
            if link not in sockets:
                sock = host.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ARP))
                sock.bind((link, ETH_P_ARP))
                sock.setblocking(False)
                sockets[link] = (sock, bytes.fromhex(mac.replace(":", "")), set())
            sockets[link][2].add(ip)
        found: set[str] = set()
        start = monotonic()
        deadlines = [start + i * float(spec.arp_interval) for i in range(spec.arp_probes)]
        end = deadlines[-1] + float(spec.arp_wait)
        sent = 0
        while (now := monotonic()) < end:
            while sent < len(deadlines) and deadlines[sent] <= now:
                for sock, own, wanted in sockets.values():
                    for target in sorted(wanted - found):
                        sock.send(arp_probe_frame(own, target))
                sent += 1
            wake = deadlines[sent] if sent < len(deadlines) else end
            readable, _, _ = select.select([s for s, _, _ in sockets.values()], [], [],
                                           max(0.0, wake - monotonic()))
            for sock in readable:
                _, own, wanted = next(v for v in sockets.values() if v[0] is sock)
                while True:
                    try:
                        frame, addr = sock.recvfrom(2048)
                    except BlockingIOError:
                        break
                    if addr[2] == PACKET_OUTGOING:
                        continue
                    if (taken := claimed_by_other(frame, own, wanted)) is not None:
                        found.add(taken)
            if all(targets <= found for _, _, targets in sockets.values()):
                break
        return found
    finally:
        for sock, _, _ in sockets.values():
            sock.close()


def dad_failures(rtnl: Rtnl, addresses: Sequence[tuple[int, str]], timeout: float,
                 monotonic: Callable[[], float], sleep: Callable[[float], None]) -> set[str]:
    """Wait until the kernel's DAD has finished for every (link index, IPv6 address) and
    return those it found duplicated. An address still tentative at `timeout` counts as
    a failure too: it is not usable."""
    pending = {ip: index for index, ip in addresses}
    failed: set[str] = set()
    deadline = monotonic() + timeout
    while pending:
        for body in addr_dump(rtnl, socket.AF_INET6):
            _, _, flags, _, index = IFADDRMSG.unpack_from(body)
            nla = attributes(body, IFADDRMSG.size, len(body))
            ip = ip_text(socket.AF_INET6, nla[IFA_ADDRESS]) if IFA_ADDRESS in nla else None
            if ip in pending and index == pending[ip]:
                if IFA_FLAGS in nla:  # the full 32 bits; the header holds the low 8
                    flags = U32.unpack_from(nla[IFA_FLAGS])[0]
                if flags & IFA_F_DADFAILED:
                    failed.add(ip)
                    del pending[ip]
                elif not flags & IFA_F_TENTATIVE:
                    del pending[ip]
        if not pending:
            break
        if monotonic() >= deadline:
            return failed | set(pending)
        sleep(0.1)
    return failed
