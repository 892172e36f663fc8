"""`machine-agent daemon` as systemd runs it, without a management cluster: a child
process with $NOTIFY_SOCKET, READY=1 once bootstrapped, no wake-ups while idle, and a
clean stop on SIGTERM — also in the middle of the bootstrap, after which the next start
resumes from the journal; an invalid configuration said to systemd; --cloud-init-wait
bounding the wait for cloud-init; WATCHDOG=1 keepalives when the unit sets a watchdog.
(With a management cluster and its watches: test_daemon_lifecycle.py.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent.host import Host
from agent.report import read_status
from agent.state import Journal
from tests.integration.daemon.service import REPO, Systemd, start, stop, wakeups
from tests.integration.identity.nocloud import agent_user_data, render_nocloud, seed_nocloud

pytestmark = pytest.mark.allow_processes
EXAMPLE = REPO / "examples" / "local-only.yaml"


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


def test_cloud_init_wait_bounds_the_wait_for_an_unfinished_cloud_init(
        tmp_path: Path, systemd: Systemd) -> None:
    root = tmp_path / "root"
    seed_nocloud(root, "instance-id: iid-node-7\n", agent_user_data(
        "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\nspec: {}\n"))
    render_nocloud(root, stages=1)  # init-local done; the init stage never comes
    started = time.monotonic()
    proc = start(["-m", "agent.cli", "--root", str(root), "daemon", "-c", str(EXAMPLE),
                  "-c", str(no_join(tmp_path)), "--cloud-init-wait", "1s"], systemd)
    try:
        said = systemd.wait_for("READY=1", timeout=20)  # not the default 5 minutes
    finally:
        code, out = stop(proc)
    assert time.monotonic() - started < 20
    status = next(m for m in said if m.startswith("STATUS=failed:"))
    assert status.startswith("STATUS=failed: CloudInitNotFinished:"), status
    assert "after 1s" in status, status
    assert code == 0, out


def test_a_malformed_cloud_init_wait_is_refused(tmp_path: Path, systemd: Systemd) -> None:
    root = tmp_path / "root"
    proc = start(["-m", "agent.cli", "--root", str(root), "daemon", "-c", str(EXAMPLE),
                  "--cloud-init-wait", "soon"], systemd)
    try:
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 2, out
    assert "--cloud-init-wait" in out and "soon" in out, out
    assert not (root / "var/lib/machine-agent").exists()  # refused before any run


def test_with_a_watchdog_set_the_daemon_keeps_telling_systemd_it_is_alive(
        tmp_path: Path, systemd: Systemd) -> None:
    root = tmp_path / "root"
    # WatchdogSec=400ms, as a site's drop-in would set it: a keepalive every 200 ms.
    proc = start(["-m", "agent.cli", "--root", str(root), "daemon", "-c", str(EXAMPLE),
                  "-c", str(no_join(tmp_path))], systemd, WATCHDOG_USEC="400000")
    try:
        systemd.wait_for("READY=1")
        ready = len(systemd.messages)
        deadline = time.monotonic() + 10
        while systemd.messages[ready:].count("WATCHDOG=1") < 3:  # still alive, serving
            assert time.monotonic() < deadline, systemd.messages
            systemd.sock.settimeout(deadline - time.monotonic())
            systemd.messages.extend(systemd.sock.recv(65536).decode().split("\n"))
    finally:
        code, out = stop(proc)
    assert code == 0, out
    assert "WATCHDOG=1" in systemd.messages[:ready]  # from the start, not only once idle
