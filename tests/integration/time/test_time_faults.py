"""Time faults beyond a dead server (test_time_chronyd.py has that one): a server whose
clock is an hour off, and chronyd not installed. Each ends with TimeNotSynchronized or a
clear command error, the join held, and nothing touches the host clock: the far-off
server is a chronyd with -x under libfaketime (`faketime -f +1h`), which shifts only the
time that process reads."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chronyd import free_udp_ports, ntp_answers, private_dir
from tests.integration.time.test_time_chronyd import Node, node, wait_for

pytestmark = pytest.mark.allow_processes
__all__ = ["node"]  # the fixture, shared with test_time_chronyd.py


def start_server(home: Path, address: str, port: int, *, offset: str | None = None
                 ) -> subprocess.Popen[bytes]:
    """A chronyd serving on address:port (loopback); `offset` (e.g. "+1h") fakes the
    clock it reads, its own only."""
    conf = home / f"{address}.conf"
    conf.write_text(f"port {port}\nbindaddress {address}\nlocal stratum 8\n"
                    f"allow 127.0.0.0/8\ncmdport 0\nbindcmdaddress {home}/{address}.sock\n"
                    f"pidfile {home}/{address}.pid\n")
    argv = ["chronyd", "-f", str(conf), "-x", "-u", "root", "-d"]
    with open(home / f"{address}.log", "w") as log:
        # Its own process group: faketime forks chronyd as its child and waits, so
        # ending the wrapper alone would leave chronyd running (issue 26 #13).
        server = subprocess.Popen(["faketime", "-f", offset, *argv] if offset else argv,
                                  stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    wait_for(lambda: ntp_answers(port, address),
             f"the NTP server on {address}:{port} to answer")
    return server


@pytest.fixture
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[str, int]]]:
    """Two good servers and one whose clock reads an hour ahead, on distinct loopback
    addresses (chronyd keeps one source per address, whatever the port)."""
    home = private_dir(tmp_path_factory.mktemp("ntp") / "run")
    (port,) = free_udp_ports()
    found = [(f"127.0.0.{n}", port) for n in (1, 2, 3)]
    started: list[subprocess.Popen[bytes]] = []
    try:
        for (address, _), offset in zip(found, (None, None, "+1h"), strict=True):
            started.append(start_server(home, address, port, offset=offset))
        yield found
    finally:
        for server in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGTERM)  # the wrapper and its chronyd
            server.wait(timeout=10)


def test_a_server_an_hour_off_is_outvoted_and_named(
        node: Node, servers: list[tuple[str, int]]) -> None:
    config = node.config(servers[0][1], syncTimeout="20s", servers=[
        {"host": address, "port": port, "minpoll": -2, "maxpoll": 0}
        for address, port in servers])
    run = subprocess.run(node.agent("run", "--only", "time", "-c", str(config)),
                         capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stdout + run.stderr
    result = node.status()["phases"]["time"]["result"]
    assert abs(result["offset"]) < 0.1
    (far, far_port), good = servers[2], servers[:2]
    measured = {s["server"]: s["offset"] for s in result["servers"]}
    assert abs(measured[f"{far}:{far_port}"] + 3600) < 1  # the agent's own check saw it
    assert all(abs(measured[f"{a}:{p}"]) < 0.1 for a, p in good)
    states = {s["name"]: s["state"] for s in result["chronySources"]}
    assert states[far] == "x", states  # chronyd: "may be in error" (a falseticker)
    assert {states[a] for a, _ in good} <= {"*", "+", "-"}, states  # selectable
    assert "minsources 2\n" in (node.root / "etc/chrony/chrony.conf").read_text()


def test_chronyd_missing_is_a_clear_error_and_join_waits(node: Node, tmp_path: Path) -> None:
    (port,) = free_udp_ports()  # nothing is contacted: chronyd cannot start
    config = node.config(port, syncTimeout="2s")
    empty = tmp_path / "bin"  # a PATH without chronyd or chronyc
    empty.mkdir()
    run = subprocess.run(node.agent("run", "--only", "time", "--only", "join", "-c",
                                    str(config)), capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PATH": str(empty)})
    assert run.returncode == 1, run.stdout + run.stderr  # permanent: install it first
    conditions = node.conditions()
    time_cond, join_cond = conditions["TimeSynchronized"], conditions["NodeJoined"]
    assert (time_cond["status"], time_cond["reason"]) == ("False", "CommandFailed")
    assert time_cond["message"] == ("command not found: chronyd (install chronyd or put it "
                                    "on PATH)")
    assert (join_cond["status"], join_cond["reason"]) == ("Unknown", "Pending")
    assert "Traceback" not in run.stderr
