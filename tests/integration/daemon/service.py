"""The daemon as systemd runs it: a child process told where $NOTIFY_SOCKET is, stopped
with SIGTERM; and what a test observes of it (sd_notify messages, context switches)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).parents[3]


class Systemd:
    """The notify socket's side of sd_notify: what a service told its manager."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.path = str(path)
        self.messages: list[str] = []

    def wait_for(self, assignment: str, timeout: float = 30) -> list[str]:
        deadline = time.monotonic() + timeout
        while assignment not in self.messages:
            left = deadline - time.monotonic()
            assert left > 0, f"no {assignment} within {timeout}s; got {self.messages}"
            self.sock.settimeout(left)
            self.messages.extend(self.sock.recv(65536).decode().split("\n"))
        return self.messages


@pytest.fixture
def systemd(tmp_path: Path) -> Iterator[Systemd]:
    manager = Systemd(tmp_path / "notify")
    yield manager
    manager.sock.close()


def start(argv: list[str], systemd: Systemd, *, log: Path | None = None,
          **env: str) -> subprocess.Popen[str]:
    """The daemon's child process; its output piped, or appended to `log` (for a long
    run whose output nobody reads meanwhile)."""
    full = {**os.environ, "PYTHONPATH": str(REPO), "NOTIFY_SOCKET": systemd.path,
            "PATH": f"{REPO / 'tests/guard-bin'}:{os.environ.get('PATH', '')}", **env}
    if log is None:
        return subprocess.Popen([sys.executable, *argv], env=full, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    with log.open("a") as out:
        return subprocess.Popen([sys.executable, *argv], env=full, text=True,
                                stdout=out, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[str], timeout: float = 5) -> tuple[int, str]:
    """SIGTERM, as `systemctl stop` sends it; the exit status and everything printed."""
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"still running {timeout}s after SIGTERM:\n{out}")
    return proc.returncode, out or ""


def wakeups(pid: int) -> int:
    """Context switches of every thread of the process: they grow only when it runs."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split()[1])
    return total
