"""sd_notify as systemd receives it: datagrams on $NOTIFY_SOCKET, path or abstract."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.report import SUMMARY, Condition
from agent.systemd import Notifier, SystemdReporter, Watchdog, status_line, take_manager_env


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    """A socket standing in for systemd's notify socket, and its $NOTIFY_SOCKET value."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        path = str(tmp_path / "notify")
        s.bind(path)
        s.settimeout(5)
        yield s, path


def received(s: socket.socket) -> list[str]:
    return s.recv(4096).decode().split("\n")


def cond(kind: str, status: str, reason: str, message: str) -> Condition:
    return Condition(kind, status, reason, message, "2025-01-01T00:00:00Z")  # type: ignore[arg-type]


def test_assignments_arrive_in_one_datagram_on_a_path_socket(
        listener: tuple[socket.socket, str]) -> None:
    s, path = listener
    assert Notifier(path).send("STATUS=hello", "READY=1")
    assert received(s) == ["STATUS=hello", "READY=1"]


def test_an_at_sign_names_an_abstract_socket() -> None:
    name = f"machine-agent-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind("\0" + name)
        s.settimeout(5)
        assert Notifier("@" + name).send("READY=1")
        assert received(s) == ["READY=1"]


def test_a_missing_socket_is_not_an_error(tmp_path: Path) -> None:
    assert Notifier(str(tmp_path / "nobody-listens")).send("READY=1") is False


def test_the_manager_variables_are_consumed_so_children_do_not_inherit_them(
        listener: tuple[socket.socket, str]) -> None:
    _, path = listener
    env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "4000000", "PATH": "/usr/bin"}
    notifier, watchdog = take_manager_env(env)
    assert notifier is not None and notifier.address == path
    assert watchdog is not None and watchdog.interval == 2.0  # half the period
    assert env == {"PATH": "/usr/bin"}


def test_outside_systemd_there_is_no_notifier_and_no_watchdog() -> None:
    assert take_manager_env({"PATH": "/usr/bin"}) == (None, None)
    assert take_manager_env({"NOTIFY_SOCKET": "vsock:2:1234"}) == (None, None)


def test_a_watchdog_meant_for_another_process_is_not_ours(
        listener: tuple[socket.socket, str]) -> None:
    _, path = listener
    env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "4000000",
           "WATCHDOG_PID": str(os.getpid() + 1)}
    assert take_manager_env(env)[1] is None


def test_watchdog_pings_until_stopped(listener: tuple[socket.socket, str]) -> None:
    s, path = listener
    dog = Watchdog(Notifier(path), interval=0.01)
    dog.start()
    pings = [received(s) for _ in range(3)]
    dog.stop()
    assert pings == [["WATCHDOG=1"]] * 3
    assert not dog._thread.is_alive()
    s.setblocking(False)
    for _ in range(1000):  # drain what was sent before stop() returned
        try:
            s.recv(4096)
        except BlockingIOError:
            break
    time.sleep(0.05)  # five intervals: a live loop would have sent again
    with pytest.raises(BlockingIOError):
        s.recv(4096)


def test_reporter_says_each_phase_then_ready_with_the_outcome(
        listener: tuple[socket.socket, str]) -> None:
    s, path = listener
    reporter = SystemdReporter(Notifier(path))
    running = [cond("NetworkReady", "Unknown", "InProgress", "running"),
               cond("TimeSynchronized", "Unknown", "Pending", "not started"),
               cond(SUMMARY, "Unknown", "Pending", "not started")]
    reporter.publish(running, final=False)
    assert received(s) == ["STATUS=0/2 phases done; NetworkReady: running"]
    reporter.publish(running, final=False)  # unchanged: nothing is sent
    done = [cond("NetworkReady", "True", "NetworkConfigured", "eth0 192.0.2.10/24"),
            cond("TimeSynchronized", "True", "TimeSynchronized", "offset 1ms"),
            cond(SUMMARY, "True", "Bootstrapped", "all phases completed")]
    reporter.publish(done, final=True)
    assert received(s) == ["STATUS=bootstrapped: Bootstrapped: all phases completed",
                           "READY=1"]


def test_a_failure_is_the_status_line_and_long_messages_stay_one_line() -> None:
    failed = [cond("NetworkReady", "True", "NetworkConfigured", "eth0 192.0.2.10/24"),
              cond("TimeSynchronized", "False", "TimeNotSynchronized",
                   "no server\nanswered " + "x" * 400),
              cond(SUMMARY, "False", "TimeNotSynchronized",
                   "TimeSynchronized: no server answered " + "x" * 400)]
    line = status_line(failed, final=True)
    # `systemctl status` names the phase's condition and its reason: never "bootstrapped"
    assert line.startswith("bootstrap failed: TimeSynchronized False (TimeNotSynchronized): "
                           "no server answered")
    assert "\n" not in line and len(line) <= 200


def test_a_configuration_that_stops_the_start_is_the_status_line() -> None:
    # No phase ran: the summary alone says why (agent.daemon's _report_summary).
    line = status_line([cond(SUMMARY, "False", "ConfigInvalid", "spec.tme: unknown field")],
                       final=True)
    assert line == "failed: ConfigInvalid: spec.tme: unknown field"
