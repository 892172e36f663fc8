"""Drift repaired or reported by the daemon: the kernel's netlink announcements of a
change (no polling) make it ask whether the network phase's result still holds, then
apply it again (`spec.network.drift: repair`) or report it (`report`) on the condition
ConfigurationDrift. Each in a namespace of its own; the daemon is driven one event at a
time, each wait bounded."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from agent.daemon.drift import CONDITION, Drift
from agent.daemon.service import Daemon
from agent.host import Host
from agent.netlink.changes import ChangeWatch
from agent.phases.network import NetworkPhase
from tests.integration.network.segment import FAST, GATEWAY, MANAGEMENT, Segment, segment

pytestmark = pytest.mark.allow_processes
WAIT = 10.0
"""Seconds an announcement may take to arrive before the test fails."""


@pytest.fixture
def seg() -> Iterator[Segment]:
    with segment() as s:
        s.listen()
        yield s


def test_a_change_in_the_namespace_is_announced(seg: Segment) -> None:
    heard = threading.Event()
    watch = ChangeWatch(Host(Path("/nonexistent"), netns=seg.node), heard.set).start()
    try:
        seg.node_ip("addr", "add", "192.0.2.99/24", "dev", "n0")
        assert heard.wait(WAIT)
    finally:
        watch.stop()


def daemon(root: Path, seg: Segment, drift: str) -> Daemon:
    network = {"conflictDetection": FAST, "drift": drift,
               "verify": {"timeout": "3s", "managementEndpoint": MANAGEMENT},
               "interfaces": [{"name": "n0", "gateway": GATEWAY,
                               "addresses": [{"static": "192.0.2.10/24"},
                                             {"static": "192.0.2.11/24"}]}]}
    Host(root).write_file("/etc/machine-agent/config.yaml", yaml.safe_dump({
        "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
        "spec": {"network": network}}))
    return Daemon(Host(root, netns=seg.node), phases=[NetworkPhase()])


def next_drift(d: Daemon) -> Drift:
    while True:
        event = d.events.get(timeout=WAIT)  # queue.Empty fails the test
        if isinstance(event, Drift):
            return event


@pytest.mark.parametrize("drift", ["repair", "report"])
def test_an_address_removed_by_hand_is_repaired_or_reported(
        seg: Segment, tmp_path: Path, drift: str) -> None:
    d = daemon(tmp_path / "node", seg, drift)
    try:
        assert d._bootstrap() == 0
        assert "inet 192.0.2.11/24" in seg.node_ip("addr", "show", "n0")
        while True:  # the bootstrap's own changes were announced: nothing drifted
            try:
                event = d.events.get_nowait()
            except queue.Empty:
                break
            d._handle(event)
        assert d.orchestrator is not None
        assert CONDITION not in {c.type for c in d.orchestrator.conditions.all()}
        seg.node_ip("addr", "del", "192.0.2.11/24", "dev", "n0")
        d._handle(next_drift(d))
        condition = d.orchestrator.conditions.get(CONDITION)
        shown = seg.node_ip("addr", "show", "n0")
        if drift == "repair":
            assert "inet 192.0.2.11/24" in shown
            assert (condition.status, condition.reason) == ("True", "DriftRepaired")
            assert condition.message == "network: changed by hand; applied again"
        else:
            assert "inet 192.0.2.11/24" not in shown
            assert (condition.status, condition.reason) == ("False", "Drifted")
            assert condition.message.startswith("network: changed by hand")
    finally:
        d.drift.stop()
