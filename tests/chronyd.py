"""chronyd for the suites that run it (time, daemon): free ports, a private directory, a
chronyd started with -x (the host clock is never touched) and stopped afterwards, and an
NTP server on loopback."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path


def free_udp_ports(count: int = 1, address: str = "127.0.0.1") -> list[int]:
    """`count` distinct UDP ports nobody on `address` uses now (all held at once while
    picked, so they differ): concurrent runs must not share a server, and a port meant
    to be dead must not be one a server of the same test got."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            probe = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
            probe.bind((address, 0))
            ports.append(int(probe.getsockname()[1]))
        return ports


def private_dir(path: Path) -> Path:
    """A directory chronyd accepts for its sockets (not world-writable)."""
    path.mkdir()
    path.chmod(0o770)
    return path


def ntp_answers(port: int, address: str = "127.0.0.1") -> bool:
    import ntplib

    try:
        ntplib.NTPClient().request(address, version=4, port=port, timeout=0.2)
    except (ntplib.NTPException, OSError):
        return False
    return True


@contextlib.contextmanager
def chronyd(conf: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A private chronyd (-x) on `conf`, logging beside it; stopped afterwards. -u root:
    the private directory is root's; chronyd refuses one another user owns."""
    with open(conf.with_suffix(".log"), "w") as log:
        proc = subprocess.Popen(["chronyd", "-f", str(conf), "-x", "-u", "root", "-d"],
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@contextlib.contextmanager
def ntp_server(home: Path, port: int, address: str = "127.0.0.1",
               timeout: float = 10.0) -> Iterator[int]:
    """A chronyd serving time (`local stratum 8`) on address:port, answering before this
    yields the port. `home` is a private directory for its files."""
    assert not ntp_answers(port, address), f"something already serves NTP on {port}"
    conf = home / f"server-{address}-{port}.conf"
    conf.write_text(f"port {port}\nbindaddress {address}\nlocal stratum 8\n"
                    f"allow {address}\ncmdport 0\nbindcmdaddress {home}/{address}-{port}.sock\n"
                    f"pidfile {home}/{address}-{port}.pid\n")
    with chronyd(conf):
        deadline = time.monotonic() + timeout
        while not ntp_answers(port, address):
            if time.monotonic() > deadline:
                raise AssertionError(f"the NTP server on {address}:{port} did not answer "
                                     f"within {timeout:g}s (see {conf.with_suffix('.log')})")
            time.sleep(0.05)
        yield port
