"""`python -m agent.sandbox.endpoints --tcp HOST:PORT --unix PATH ...`: sockets that
accept connections and close them, until SIGTERM.

They stand for what the join phase's preflight connects to and the sandbox has no real
program for: the workload cluster's API endpoint (the kubeadm stand-in answers for the
cluster itself) and each node's container runtime socket. A process of their own, so
that a sandbox kept with --keep still answers after the demo has exited.
"""

from __future__ import annotations

import argparse
import contextlib
import selectors
import signal
import socket
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.sandbox.endpoints",
                                     description=__doc__)
    parser.add_argument("--tcp", action="append", default=[], metavar="HOST:PORT")
    parser.add_argument("--unix", action="append", default=[], metavar="PATH")
    args = parser.parse_args(argv)
    listeners: list[socket.socket] = []
    for spec in args.tcp:
        host, _, port = spec.rpartition(":")
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), int(port)))
        listeners.append(sock)
    for path in args.unix:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        listeners.append(sock)
    selector = selectors.DefaultSelector()
    for sock in listeners:
        sock.listen(64)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    print("ready", flush=True)
    while running[0]:
        for key, _ in selector.select(timeout=0.2):
            listener = key.fileobj
            assert isinstance(listener, socket.socket)
            with contextlib.suppress(OSError):
                conn, _ = listener.accept()
                conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
