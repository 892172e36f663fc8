"""`machine-agent daemon` as systemd runs it: a child process with $NOTIFY_SOCKET,
READY=1 once bootstrapped, no wake-ups while idle, and a clean stop on SIGTERM — also in
the middle of the bootstrap, after which the next start resumes from the journal."""

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

from agent.host import Host
from agent.report import read_status
from agent.state import Journal

REPO = Path(__file__).parents[3]
EXAMPLE = REPO / "examples" / "local-only.yaml"
pytestmark = pytest.mark.allow_processes


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


def start(argv: list[str], systemd: Systemd, **env: str) -> subprocess.Popen[str]:
    full = {**os.environ, "PYTHONPATH": str(REPO), "NOTIFY_SOCKET": systemd.path, **env}
    return subprocess.Popen([sys.executable, *argv], env=full, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[str], timeout: float = 5) -> tuple[int, str]:
    """SIGTERM, as `systemctl stop` sends it; the exit status and everything printed."""
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"still running {timeout}s after SIGTERM:\n{out}")
    return proc.returncode, out


def wakeups(pid: int) -> int:
    """Context switches of every thread of the process: they grow only when it runs."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split()[1])
    return total


def no_join(tmp_path: Path) -> Path:
    """A lab node with nothing to join: the service's own behaviour is under test here."""
    drop_in = tmp_path / "no-join.yaml"
    drop_in.write_text("apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"
                       "spec:\n  skipPhases: [join]\n")
    return drop_in


def test_ready_after_bootstrap_idle_without_wakeups_and_stops_cleanly_on_sigterm(
        tmp_path: Path, systemd: Systemd) -> None:
    root = tmp_path / "root"
    proc = start(["-m", "agent.cli", "--root", str(root), "daemon", "-c", str(EXAMPLE),
                  "-c", str(no_join(tmp_path))], systemd)
    try:
        said = systemd.wait_for("READY=1")
    finally:
        if proc.poll() is not None:
            print(proc.communicate()[0])
    statuses = [m for m in said if m.startswith("STATUS=")]
    assert statuses[-1] == "STATUS=bootstrapped: Bootstrapped: all phases completed"
    conditions, final = read_status(Host(root)) or ([], False)
    assert final and {c.type: c.status for c in conditions}["NodeBootstrapped"] == "True"

    time.sleep(0.3)  # let start-up settle, then watch it idle
    before = wakeups(proc.pid)
    time.sleep(1.5)
    assert wakeups(proc.pid) == before, "the idle daemon woke up"

    code, out = stop(proc)
    assert code == 0, out
    assert "stopping on SIGTERM" in out
    assert systemd.wait_for("STOPPING=1")
    journal = Journal.load(Host(root))
    assert {n: r.state for n, r in journal.phases.items()} == {
        "network": "completed", "time": "completed", "cni": "completed"}  # join: skipped


def test_sigterm_mid_bootstrap_stops_within_seconds_and_the_next_start_resumes(
        tmp_path: Path, systemd: Systemd) -> None:
    root = tmp_path / "root"
    argv = ["-m", "tests.daemon_for_tests", str(root)]
    proc = start(argv, systemd, SLOW_SECONDS="600")
    systemd.wait_for("STATUS=1/2 phases done; TimeSynchronized: waiting for the slow thing")
    started = time.monotonic()
    code, out = stop(proc)
    assert code == 0, out
    assert time.monotonic() - started < 5
    assert "stopped during the bootstrap" in out
    assert "READY=1" not in systemd.messages  # never claimed an outcome it did not have
    journal = Journal.load(Host(root))  # readable: the stop left it consistent
    assert {n: r.state for n, r in journal.phases.items()} == {
        "network": "completed", "time": "started"}

    systemd.messages.clear()
    again = start(argv, systemd, SLOW_SECONDS="0")
    systemd.wait_for("READY=1")
    code, out = stop(again)
    assert code == 0, out
    assert "up to date" in out  # the files phase is not redone ...
    assert (root / "var/log/steps.log").read_text() == "appended once\n"
    journal = Journal.load(Host(root))
    assert journal.phases["time"].state == "completed"  # ... the interrupted one is
    assert journal.phases["time"].attempts == 2


def test_an_invalid_configuration_is_reported_and_exits_2(
        tmp_path: Path, systemd: Systemd) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"
                   "spec:\n  tme: {}\n")
    root = tmp_path / "root"
    proc = start(["-m", "agent.cli", "--root", str(root), "daemon", "-c", str(bad)], systemd)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2, out
    assert any(m.startswith("STATUS=failed: ConfigInvalid:") and "spec.tme" in m
               for m in systemd.wait_for("READY=1"))
    conditions, final = read_status(Host(root)) or ([], False)
    assert final and conditions[-1].reason == "ConfigInvalid"
