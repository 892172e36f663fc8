"""The timesyncd renderer end to end: drop-in written, timesyncd restarted, and the gate
judged by timedatectl's NTPSynchronized plus the offset ntplib measures.

systemd-timesyncd cannot run here (no systemd as PID 1): timedatectl is answered by a
fake Host, and a small in-process NTP responder stands in for the server."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent.config import load_config
from agent.config.sources import FileSource
from agent.host import Clock, CommandResult, Host
from agent.orchestrator import Orchestrator
from agent.phases.time import TimePhase


@pytest.fixture
def ntp_responder() -> Iterator[int]:
    """Answers NTP client requests on 127.0.0.1 with this machine's time, stratum 2."""
    import ntplib

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(256)
            except TimeoutError:
                continue
            request = ntplib.NTPPacket()
            request.from_data(data)
            now = ntplib.system_to_ntp_time(time.time())
            reply = ntplib.NTPPacket(version=4, mode=4, tx_timestamp=now)
            reply.stratum, reply.ref_id = 2, 0x7F000001
            reply.orig_timestamp = request.tx_timestamp
            reply.recv_timestamp = reply.ref_timestamp = now
            sock.sendto(reply.to_data(), peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=2)
        sock.close()


class TimedatectlHost(Host):
    def __init__(self, root: Path, synchronized: str) -> None:
        super().__init__(root, clock=NoWait())
        self.synchronized = synchronized
        self.commands: list[list[str]] = []

    def read_only_view(self) -> Host:
        return self

    def run(self, argv: Sequence[str], **kwargs: Any) -> CommandResult:
        self.commands.append(list(argv))
        out = self.synchronized + "\n" if argv[0] == "timedatectl" else ""
        return CommandResult(tuple(argv), 0, out, "", 0.01)


class NoWait(Clock):
    def __init__(self) -> None:
        self.t = 0.0

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def run_time(tmp_path: Path, host: Host, port: int) -> Any:
    # timesyncd takes no port: the responder's port reaches only the ntplib check, which
    # is why this test overrides the source after validation is proven separately.
    cfg = tmp_path / "agent.yaml"
    cfg.write_text("apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\nspec:\n"
                   "  retry: {attempts: 1}\n  time:\n    renderer: timesyncd\n"
                   "    servers: [127.0.0.1]\n    syncTimeout: 2s\n")
    loaded = load_config(host, [FileSource(str(cfg), outside_root=True)])
    spec = loaded.config.spec
    source = dataclasses.replace(spec.time.servers[0], port=port)
    time_spec = dataclasses.replace(spec.time, servers=[source])
    loaded.config = dataclasses.replace(loaded.config,
                                        spec=dataclasses.replace(spec, time=time_spec))
    return Orchestrator(loaded, host, phases=[TimePhase()]).run()


def test_timesyncd_drop_in_restart_and_gate(tmp_path: Path, ntp_responder: int) -> None:
    host = TimedatectlHost(tmp_path / "root", "yes")
    result = run_time(tmp_path, host, ntp_responder)
    assert result.ok, result.outcomes
    dropin = tmp_path / "root/etc/systemd/timesyncd.conf.d/machine-agent.conf"
    assert "NTP=127.0.0.1\n" in dropin.read_text()
    assert host.commands[0] == ["systemctl", "restart", "systemd-timesyncd"]
    assert result.outcomes[0].message.startswith(
        f"clock synchronised to 127.0.0.1:{ntp_responder} (stratum 2), offset ")


def test_timesyncd_not_synchronised_holds_the_gate(tmp_path: Path, ntp_responder: int) -> None:
    host = TimedatectlHost(tmp_path / "root", "no")
    result = run_time(tmp_path, host, ntp_responder)
    assert result.outcomes[0].outcome == "failed"
    assert result.outcomes[0].reason == "TimeNotSynchronized"
    assert "timesyncd: offset" in result.outcomes[0].message
    assert "status Not synchronised" in result.outcomes[0].message
