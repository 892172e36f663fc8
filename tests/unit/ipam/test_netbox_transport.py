"""The NetBox plugin's transport: a kept-alive connection that the server (or a proxy in
front of it) closed while it sat idle in the pool is not an outage: the request is asked
again, once, on a fresh connection; closed again, it is one."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.host import Host
from agent.ipam.base import ClaimRequest, IPAMUnavailable, PluginEnv, PoolNotFound, open_plugin

TOKEN_FILE = "/etc/machine-agent/netbox.token"
REQUEST = ClaimRequest(claim_key="uid-1/eth0/ipv4", pool="v4", family="ipv4",
                       interface="eth0", machine_namespace="site-a", machine_name="worker-0")
EMPTY = json.dumps({"count": 0, "next": None, "results": []}).encode()
ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
          + str(len(EMPTY)).encode() + b"\r\n\r\n" + EMPTY)


class ClosingServer:
    """HTTP on 127.0.0.1 that answers the first request of each connection (keeping it
    alive) and closes the connection, unanswered, on the second: as a server with a
    keep-alive time-out does when the client reuses the connection just too late."""

    def __init__(self, drop_fresh: bool = False) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(10)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.drop_fresh = drop_fresh
        self.answered = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        for _ in range(4):  # bounded: the tests need at most three connections
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed by __exit__
                return
            with conn:
                self._conn = conn
                conn.settimeout(10)
                try:
                    if not self.drop_fresh and conn.recv(65536):
                        conn.sendall(ANSWER)
                        self.answered += 1
                    if conn.recv(65536):
                        self.dropped += 1  # read the request, close without a word
                except OSError:  # shut down by __exit__
                    return

    def __enter__(self) -> ClosingServer:
        self._conn: socket.socket | None = None
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # shutdown wakes a blocked accept() or recv() (close alone does not)
        for sock in (self.sock, self._conn):
            if sock is not None:
                with contextlib.suppress(OSError):  # already closed
                    sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=10)
        self.sock.close()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    host = Host(tmp_path)
    host.write_file(TOKEN_FILE, "nbt_" + "t" * 40 + "\n", mode=0o600)
    yield host


def plugin_for(host: Host, url: str) -> object:
    return open_plugin("netbox", {"netbox": {
        "url": url, "tokenFile": TOKEN_FILE, "timeout": "5s",
        "pools": {"v4": {"prefix": "192.0.2.0/24"}}}}, PluginEnv(host))


def test_a_connection_closed_while_idle_is_asked_again_on_a_fresh_one(host: Host) -> None:
    with ClosingServer() as server:
        plugin = plugin_for(host, server.url)
        for _ in range(2):  # the second look reuses the first connection, which is closed
            with pytest.raises(PoolNotFound):  # NetBox answered: it knows no such prefix
                plugin.claim(REQUEST)  # type: ignore[attr-defined]
    assert (server.answered, server.dropped) == (2, 1)


def test_asked_again_once_only_then_it_is_an_outage(host: Host) -> None:
    with ClosingServer(drop_fresh=True) as server:
        plugin = plugin_for(host, server.url)
        with pytest.raises(IPAMUnavailable, match="did not answer"):
            plugin.claim(REQUEST)  # type: ignore[attr-defined]
    # the request was sent twice (the second time on a new connection), not more
    assert (server.answered, server.dropped) == (0, 2)
