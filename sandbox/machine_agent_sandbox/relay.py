"""`python -m machine_agent_sandbox.relay [--netns NS] --listen HOST:PORT [--to-netns NS]
--to HOST:PORT --ready FILE`:
a TCP relay that listens inside network namespace `--netns` (default: its own) and
connects out from inside `--to-netns` (default: its own), until SIGTERM.

It puts an external management API server (MACHINE_AGENT_TEST_KUBECONFIG, reached from
the machine's own network, e.g. kind's 127.0.0.1:PORT) at the sandbox's API endpoint in
the router namespace, where the nodes reach it. Bytes only: TLS is end to end between the
agent and the server, which the agent verifies with its kubeconfig's `tls-server-name`.
The other way round (`--to-netns`), it puts the stand-in, which listens only in the router
namespace, at a loopback port of the machine (port 0: any free one), for the tests' fault
proxy (machine_agent_sandbox.testkit.sandboxproxy).
`--ready FILE` is written once it listens, holding the HOST:PORT it listens on (and names
the sandbox's directory on the command line, so that the sandbox's undo recognises the
process as its own).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import sys
import threading
from pathlib import Path

from machine_agent_sandbox.files import write_atomic

CHUNK = 65536
CONNECT_TIMEOUT = 10.0


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy until `source` ends, then end `sink`'s sending side (half-close)."""
    with contextlib.suppress(OSError):
        while data := source.recv(CHUNK):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _connect(target: tuple[str, int], netns: str | None) -> socket.socket:
    if netns is None:
        return socket.create_connection(target, timeout=CONNECT_TIMEOUT)
    from pyroute2 import netns as namespaces

    family = socket.AF_INET6 if ":" in target[0] else socket.AF_INET
    sock: socket.socket = namespaces.create_socket(netns, family, socket.SOCK_STREAM, flags=0)
    sock.settimeout(CONNECT_TIMEOUT)
    try:
        sock.connect(target)
    except OSError:
        sock.close()
        raise
    return sock


def _serve(client: socket.socket, target: tuple[str, int], netns: str | None) -> None:
    try:
        upstream = _connect(target, netns)
    except OSError:
        client.close()
        return
    upstream.settimeout(None)
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m machine_agent_sandbox.relay",
                                     description=__doc__)
    parser.add_argument("--netns", help="namespace to listen in (default: its own)")
    parser.add_argument("--listen", required=True, metavar="HOST:PORT")
    parser.add_argument("--to", required=True, metavar="HOST:PORT")
    parser.add_argument("--to-netns", help="namespace to connect from (default: its own)")
    parser.add_argument("--ready", required=True, type=Path, metavar="FILE")
    args = parser.parse_args(argv)
    from pyroute2 import netns

    host, port = _address(args.listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = (socket.socket(family, socket.SOCK_STREAM) if args.netns is None else
                netns.create_socket(args.netns, family, socket.SOCK_STREAM, flags=0))
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(64)
    listener.settimeout(0.2)
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    target = _address(args.to)
    bound_host, bound_port = listener.getsockname()[:2]
    bound = f"[{bound_host}]" if ":" in bound_host else bound_host
    write_atomic(args.ready, f"{bound}:{bound_port}\n")
    while running[0]:
        try:
            client, _ = listener.accept()
        except TimeoutError:
            continue
        client.settimeout(None)
        threading.Thread(target=_serve, args=(client, target, args.to_netns),
                         daemon=True).start()
    listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
