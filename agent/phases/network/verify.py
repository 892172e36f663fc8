"""Proof on the wire that the new configuration works: each gateway answers neighbour
resolution, and the management endpoint accepts a TCP connection. Both bounded."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from agent.config import AgentConfig
from agent.errors import Reason, TemporaryError
from agent.netlink.rtnl import NDMSG, RTM_GETNEIGH, Rtnl, attributes, ip_text

if TYPE_CHECKING:
    from agent.host import Host

NUD_RESOLVED = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80
"""REACHABLE, STALE, DELAY, PROBE, NOARP, PERMANENT: the neighbour answered once."""
DISCARD_PORT = 9
NDA_DST = 1


def management_endpoint(config: AgentConfig) -> tuple[str, int] | None:
    """spec.network.verify.managementEndpoint, else the host and port of
    spec.management.server (port 443 when the URL has none); None when neither is set."""
    endpoint = config.spec.network.verify.management_endpoint
    if endpoint is not None:
        host, _, port = endpoint.rpartition(":")
        return host.strip("[]"), int(port)
    if config.spec.management.server:
        url = urlsplit(config.spec.management.server)
        if url.hostname:
            return url.hostname, url.port or 443
    return None


def gateway_resolves(host: Host, rtnl: Rtnl, gateway: str, timeout: float,
                     monotonic: Callable[[], float], sleep: Callable[[float], None],
                     ifindex: int = 0) -> bool:
    """Whether `gateway` answers ARP or neighbour discovery within `timeout`. A datagram
    to its discard port makes the kernel resolve it; the neighbour table tells. An IPv6
    link-local gateway is sent to on its link (`ifindex`), the only place it exists."""
    family = socket.AF_INET6 if ":" in gateway else socket.AF_INET
    target: tuple[str, int] | tuple[str, int, int, int] = (gateway, DISCARD_PORT)
    if family == socket.AF_INET6:
        target = (gateway, DISCARD_PORT, 0, ifindex)
    deadline = monotonic() + timeout
    with host.socket(family, socket.SOCK_DGRAM) as sock:
        while True:
            # no route yet or unreachable: the neighbour table is the answer either way
            with contextlib.suppress(OSError):
                sock.sendto(b"", target)
            for _, body in rtnl.dump(RTM_GETNEIGH, NDMSG.pack(family, 0, 0, 0, 0)):
                _, index, state, _, _ = NDMSG.unpack_from(body)
                dst = attributes(body, NDMSG.size, len(body)).get(NDA_DST)
                if (state & NUD_RESOLVED and dst is not None and ifindex in (0, index)
                        and ip_text(family, dst) == gateway):
                    return True
            if monotonic() >= deadline:
                return False
            sleep(0.2)


def management_accepts(host: Host, endpoint: tuple[str, int], timeout: float,
                       monotonic: Callable[[], float], sleep: Callable[[float], None]) -> str:
    """Connect to the endpoint until it accepts or `timeout` passes; the error says why
    not. Returns the address that accepted."""
    name, port = endpoint
    deadline = monotonic() + timeout
    last = "no attempt"
    while True:
        try:
            infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        except socket.gaierror as err:
            infos, last = [], f"cannot resolve {name}: {err.strerror}"
        for family, kind, proto, _, address in infos:
            with host.socket(family, kind, proto) as sock:
                sock.settimeout(max(0.1, min(2.0, deadline - monotonic())))
                try:
                    sock.connect(address)
                except OSError as err:
                    last = f"{address[0]} port {port}: {err.strerror or err}"
                    continue
                return str(address[0])
        if monotonic() >= deadline:
            raise TemporaryError(f"the management endpoint {name}:{port} did not accept a "
                                 f"connection within {timeout:g}s ({last})",
                                 reason=Reason.ManagementUnreachable)
        sleep(0.2)
