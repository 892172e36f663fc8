"""The time phase against real chronyd, as a user runs it: `machine-agent run --only time`
with a config file and --root.

A chronyd serves time on 127.0.0.1, on a free port (`local stratum 8`). The client chronyd is the
node's: it runs on the file the agent rendered into the test's root, started by the
agent's own reload step (spec.time.reloadCommand), and the gate watches it through chronyc
on a private socket. Every chronyd runs with -x (the host clock is never touched), on
private sockets, pid files and ports, so a system chronyd is neither used nor disturbed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chronyd import free_udp_ports, private_dir
from tests.chronyd import ntp_server as serve_ntp

SERVER_PORT, DEAD_PORT = free_udp_ports(2)
"""The test NTP server's port, and one nothing serves (the 'server down' cases)."""
pytestmark = pytest.mark.allow_processes


def wait_for(condition: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout}s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def ntp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A chronyd serving time on 127.0.0.1:SERVER_PORT; stopped afterwards."""
    with serve_ntp(private_dir(tmp_path_factory.mktemp("srv") / "run"), SERVER_PORT) as port:
        yield port


class Node:
    """The node under test: a root for the agent and the client chronyd it starts."""

    def __init__(self, base: Path) -> None:
        self.root = base / "root"
        self.run_dir = private_dir(base / "client")
        self.socket = self.run_dir / "chronyd.sock"
        self.pidfile = self.run_dir / "chronyd.pid"
        self.wrapper = self.run_dir / "client.conf"
        # What the test needs around the agent's file: private socket, pid file, no
        # NTP port of its own. The sources and the rest come from the rendered file.
        self.wrapper.write_text(f"""include {self.root}/etc/chrony/chrony.conf
port 0
cmdport 0
bindcmdaddress {self.socket}
pidfile {self.pidfile}
""")

    def config(self, port: int, **time: Any) -> Path:
        doc = {
            "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
            "spec": {
                "retry": {"attempts": 1},
                "time": {
                    "servers": [{"host": "127.0.0.1", "port": port, "minpoll": -2,
                                 "maxpoll": 0}],
                    "checkInterval": "200ms",
                    "chrony": {"driftFile": f"{self.run_dir}/drift", "rtcsync": False,
                               "commandAddress": str(self.socket)},
                    # The node's "restart chronyd": start the private client on the
                    # rendered file, never touching the clock.
                    "reloadCommand": ["chronyd", "-x", "-u", "root", "-f", str(self.wrapper)],
                    **time,
                },
            },
        }
        path = self.run_dir / "agent.json"
        path.write_text(json.dumps(doc))
        return path

    def start_client_on_sources_dir(self) -> None:
        """For target dropin: a client already running on the image's own configuration,
        reading sources from the root's sources.d, as Debian's chrony.conf does."""
        sources = self.root / "etc/chrony/sources.d"
        sources.mkdir(parents=True)
        self.wrapper.write_text(f"""sourcedir {sources}
makestep 1 3
driftfile {self.run_dir}/drift
port 0
cmdport 0
bindcmdaddress {self.socket}
pidfile {self.pidfile}
""")
        subprocess.run(["chronyd", "-x", "-u", "root", "-f", str(self.wrapper)], check=True,
                       timeout=10)
        wait_for(self.socket.exists, "the client chronyd's socket")

    def agent(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "agent.cli", "--root", str(self.root), *args]

    def status(self) -> dict[str, Any]:
        # Exits 1 or 2 for a failed or degraded outcome, as cloud-init status does.
        done = subprocess.run(self.agent("status", "--json"), capture_output=True, text=True,
                              timeout=30)
        assert done.returncode in (0, 1, 2), done.stderr
        doc: dict[str, Any] = json.loads(done.stdout)
        return doc

    def conditions(self) -> dict[str, dict[str, str]]:
        return {c["type"]: c for c in self.status()["conditions"]}

    def stop_client(self) -> None:
        """Stop the client chronyd the agent started: by its own pid file, and only if
        that pid is still our chronyd."""
        try:
            pid = int(self.pidfile.read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (FileNotFoundError, ValueError):
            return
        if str(self.wrapper).encode() not in cmdline:
            return
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not Path(f"/proc/{pid}").exists(), "the client chronyd to stop")


@pytest.fixture
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    # A short base path: Unix socket paths are limited to 107 bytes.
    the_node = Node(tmp_path_factory.mktemp("node"))
    try:
        yield the_node
    finally:
        the_node.stop_client()


def test_gate_opens_against_a_live_server(node: Node, ntp_server: int) -> None:
    config = node.config(ntp_server, syncTimeout="30s")
    start = time.monotonic()
    run = subprocess.run(node.agent("run", "--only", "time", "-c", str(config)),
                         capture_output=True, text=True, timeout=90)
    took = time.monotonic() - start
    assert run.returncode == 0, run.stdout + run.stderr
    assert "time     applied 2 change(s): clock synchronised to 127.0.0.1 (stratum 9)" \
        in run.stdout
    rendered = (node.root / "etc/chrony/chrony.conf").read_text()
    assert f"server 127.0.0.1 port {SERVER_PORT} iburst minpoll -2 maxpoll 0\n" in rendered
    cond = node.conditions()["TimeSynchronized"]
    assert (cond["status"], cond["reason"]) == ("True", "TimeSynchronized")
    result = node.status()["phases"]["time"]["result"]
    assert abs(result["offset"]) < 0.1 and result["stratum"] == 9
    assert result["servers"] == [{"server": f"127.0.0.1:{SERVER_PORT}", "reachable": True,
                                  "stratum": 8, "offset": result["servers"][0]["offset"],
                                  "delay": result["servers"][0]["delay"]}]
    # chronyd itself selected the server ('*'), as `chronyc sources` shows it
    assert [(s["name"], s["state"]) for s in result["chronySources"]] == [("127.0.0.1", "*")]
    print(f"\ngate opened after {result['waited']}s of waiting; whole run {took:.1f}s")

    # Running again changes nothing and does not restart chronyd (a second start of the
    # private client would fail on its pid file).
    again = subprocess.run(node.agent("run", "--only", "time", "-c", str(config)),
                           capture_output=True, text=True, timeout=90)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "time     up to date, nothing to apply" in again.stdout


def test_dead_server_keeps_the_gate_closed_and_join_pending(node: Node) -> None:
    config = node.config(DEAD_PORT, syncTimeout="3s")
    start = time.monotonic()
    agent = subprocess.Popen(node.agent("run", "--only", "time", "--only", "join", "-c",
                                        str(config)),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    status_file = node.root / "var/lib/machine-agent/status.json"
    waiting: list[str] = []

    def seen_waiting() -> bool:
        try:
            doc = json.loads(status_file.read_text())
        except (FileNotFoundError, ValueError):
            return agent.poll() is not None
        waiting.extend(c["message"] for c in doc["conditions"]
                       if c["reason"] == "TimeSynchronizing")
        return bool(waiting) or agent.poll() is not None

    wait_for(seen_waiting, "the agent to report TimeSynchronizing", timeout=30)
    out, err = agent.communicate(timeout=60)
    took = time.monotonic() - start
    assert waiting and "waiting for the clock to synchronise (offset" in waiting[0]
    assert agent.returncode == 3, out + err  # temporary: running again may succeed
    # bounded: 3s of gate plus two ntplib checks of at most 2s each, plus start-up
    assert took < 3 + 2 * 2 + 5, took
    conditions = node.conditions()
    time_cond, join_cond = conditions["TimeSynchronized"], conditions["NodeJoined"]
    assert (time_cond["status"], time_cond["reason"]) == ("False", "TimeNotSynchronized")
    assert "clock not synchronised within 3s" in time_cond["message"]
    assert f"servers tried: 127.0.0.1:{DEAD_PORT} unreachable (No response received from " \
        "127.0.0.1)" in time_cond["message"]
    assert "; chronyd's sources: 127.0.0.1 never reached" in time_cond["message"]
    assert (join_cond["status"], join_cond["reason"]) == ("Unknown", "Pending")
    assert "waiting for the time phase (TimeNotSynchronized)" in join_cond["message"]
    assert "join     not run" in out
    result = node.status()["phases"]["time"]
    assert result["state"] == "failed"


def test_dead_server_with_on_timeout_warn_goes_on_with_a_warning(node: Node) -> None:
    config = node.config(DEAD_PORT, syncTimeout="2s", onTimeout="warn")
    run = subprocess.run(node.agent("run", "--only", "time", "-c", str(config)),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    cond = node.conditions()["TimeSynchronized"]
    assert (cond["status"], cond["reason"]) == ("True", "TimeNotSynchronized")
    assert f"127.0.0.1:{DEAD_PORT} unreachable" in cond["message"]
    assert cond["message"].endswith("join goes on because spec.time.onTimeout is warn")
    result = node.status()["phases"]["time"]["result"]
    assert result["synchronised"] is False and result["servers"][0]["reachable"] is False


def test_dropin_is_picked_up_by_chronyc_reload_sources(node: Node, ntp_server: int) -> None:
    node.start_client_on_sources_dir()
    config = node.config(ntp_server, syncTimeout="30s", chrony={
        "target": "dropin", "commandAddress": str(node.socket)}, reloadCommand=None)
    run = subprocess.run(node.agent("run", "--only", "time", "-c", str(config)),
                         capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "reload chronyd's sources: chronyc -n -c -h" in run.stderr
    dropin = node.root / "etc/chrony/sources.d/machine-agent.sources"
    wanted = f"server 127.0.0.1 port {SERVER_PORT} iburst minpoll -2 maxpoll 0\n"
    assert wanted in dropin.read_text()
    assert not (node.root / "etc/chrony/chrony.conf").exists()
    cond = node.conditions()["TimeSynchronized"]
    assert (cond["status"], cond["reason"]) == ("True", "TimeSynchronized")
    assert cond["message"].startswith("clock synchronised to 127.0.0.1 (stratum 9)")


def test_chronyd_accepts_the_golden_chrony_files() -> None:
    golden = Path(__file__).parents[2] / "unit/time/golden"
    for name in ("chrony.conf", "machine-agent.sources"):
        check = subprocess.run(["chronyd", "-p", "-f", str(golden / name)],
                               capture_output=True, text=True, timeout=10)
        assert check.returncode == 0, f"{name}: {check.stderr}"
