"""`python -m machine_agent_sandbox.endpoints --unix PATH --kubelet ROOT ...`: sockets that accept
connections and close them, and the nodes' kubelets, until SIGTERM.

The sockets stand for what the join phase's preflight connects to and the sandbox has no
real program for: each node's container runtime socket. The kubelet of each node root
(`--kubelet`) does what a running kubelet does once a CNI configuration appears in
/etc/cni/net.d: it posts its Node Ready, with the credentials of its kubelet.conf (the
kubeadm stand-in registered the Node NotReady at join). A process of their own, so that
a sandbox kept with --keep still answers after the demo has exited.
"""

from __future__ import annotations

import argparse
import contextlib
import selectors
import signal
import socket
import sys
from pathlib import Path

from machine_agent_sandbox.kubeadm.kubelet_start import kubelet_sync


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m machine_agent_sandbox.endpoints",
                                     description=__doc__)
    parser.add_argument("--unix", action="append", default=[], metavar="PATH")
    parser.add_argument("--kubelet", action="append", default=[], metavar="ROOT")
    args = parser.parse_args(argv)
    listeners: list[socket.socket] = []
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
    posted: dict[str, str] = {}  # per node root, the kubelet.conf Ready was posted with
    while running[0]:
        for root in args.kubelet:
            kubelet_sync(Path(root), posted)
        for key, _ in selector.select(timeout=0.2):
            listener = key.fileobj
            assert isinstance(listener, socket.socket)
            with contextlib.suppress(OSError):
                conn, _ = listener.accept()
                conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
