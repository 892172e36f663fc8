"""The Host's kernel interfaces: rtnetlink and other sockets (in the node's network
namespace), and IPv6 settings of links."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from agent.errors import PermanentError
from agent.host.base import T
from agent.host.commands import Commands

if TYPE_CHECKING:
    import socket

_SYSCTL_WORD = re.compile(r"[A-Za-z0-9_.@-]{1,15}")
"""An interface name or a key under /proc/sys/net/ipv6/conf: no '/', nothing to walk up."""


NETNS_RUN_DIR = "/var/run/netns"
"""Where `ip netns add` pins the named namespaces."""


CLONE_NEWNET = 0x40000000


def _socket_in_netns(name: str, family: int, kind: int, proto: int) -> socket.socket:
    """A socket made inside the named network namespace (see `_in_netns`): a socket
    stays in the namespace it was made in. pyroute2's helper forks a child and passes
    the descriptor back (13 ms a socket, after a 0.2 s import); the network phase opens
    a few per run."""
    import socket

    return _in_netns(name, lambda: socket.socket(family, kind, proto))


def _in_netns(name: str, action: Callable[[], T]) -> T:
    """`action`'s result, run by a short-lived thread that enters the named network
    namespace with setns(2), which moves only the calling thread (it ends right after).
    The namespace is never created here."""
    import ctypes
    import threading

    done: list[T] = []
    failed: list[OSError] = []

    def run() -> None:
        try:
            fd = os.open(f"{NETNS_RUN_DIR}/{name}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, f"cannot enter network namespace {name}: "
                                        f"{os.strerror(code)}")
            finally:
                os.close(fd)
            done.append(action())
        except OSError as err:
            failed.append(err)

    thread = threading.Thread(target=run, name=f"netns {name}")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return done[0]


class Kernel(Commands):
    """A part of Host (agent.host)."""

    def rtnetlink(self) -> socket.socket:
        """A plain NETLINK_ROUTE socket in the node's namespace, for the network phase's
        own rtnetlink client (agent/netlink). Changes through it must be recorded with
        `record_effect`; the caller closes it."""
        import socket

        return self.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # 0: NETLINK_ROUTE

    def socket(self, family: int, kind: int, proto: int = 0) -> socket.socket:
        """A socket in the node's namespace, for probes and reachability checks on the
        wire (ARP probes, TCP connects); it changes nothing. The caller closes it."""
        import socket

        if not self.netns:
            return socket.socket(family, kind, proto)
        return _socket_in_netns(self.netns, family, kind, proto)

    def set_ipv6_conf(self, settings: Sequence[tuple[str, str, int]]) -> list[bool]:
        """Write /proc/sys/net/ipv6/conf/LINK/KEY = VALUE for each (LINK, KEY, VALUE) in
        the node's namespace, in one visit to it (what netlink cannot set, as
        accept_ra); each write is recorded as a side effect. False for a setting not
        written because the link has no IPv6 (the kernel's or the link's is off)."""
        for link, key, _ in settings:
            if not _SYSCTL_WORD.fullmatch(link) or not _SYSCTL_WORD.fullmatch(key) \
                    or link in (".", ".."):
                raise PermanentError(f"refused sysctl net.ipv6.conf.{link!r}.{key!r}")
            self.check_writable(f"sysctl net.ipv6.conf.{link}.{key}")

        def write() -> list[bool]:
            done = []
            for link, key, value in settings:
                try:
                    with open(f"/proc/sys/net/ipv6/conf/{link}/{key}", "w") as out:
                        out.write(f"{value}\n")
                except FileNotFoundError:
                    done.append(False)
                else:
                    done.append(True)
            return done

        written = _in_netns(self.netns, write) if self.netns else write()
        for (link, key, value), ok in zip(settings, written, strict=True):
            if ok:
                self.effects.record(f"sysctl net.ipv6.conf.{link}.{key} = {value}")
        return written
