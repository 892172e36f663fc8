"""Changes of the node's links, addresses and routes as the kernel announces them (the
rtnetlink multicast groups), for the daemon to notice drift without polling: a thread
blocks in select() on the socket and a stop pipe, and calls `on_change` once per batch
of announcements read; nothing runs while nothing changes."""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from agent.netlink.rtnl import WATCHED_GROUPS

if TYPE_CHECKING:
    import socket

    from agent.host import Host

log = logging.getLogger("agent.netlink")

READ_SIZE = 1 << 16


class ChangeWatch:
    """Calls `on_change()` from its own thread after the kernel announces a change of a
    link, an address or a route in the host's namespace, until `stop()`."""

    def __init__(self, host: Host, on_change: Callable[[], None]) -> None:
        self.on_change = on_change
        self._sock: socket.socket = host.rtnetlink()
        self._sock.bind((0, WATCHED_GROUPS))
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="netlink-changes",
                                        daemon=True)

    def start(self) -> ChangeWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._stop_w, b"x")
        self._thread.join(timeout=10)
        for fd in (self._stop_r, self._stop_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._sock.close()

    def _run(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._sock, selectors.EVENT_READ)
            selector.register(self._stop_r, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in selector.select()}
                if self._stop_r in ready:
                    return
                try:
                    self._sock.recv(READ_SIZE)
                except OSError as err:  # ENOBUFS: announcements lost, still a change
                    log.debug("netlink announcements: %s", err)
                self.on_change()
