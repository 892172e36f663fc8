"""kubeadm and the agent killed together in the middle of the join (issue 26 #3): the
join is journaled as in flight before kubeadm starts, and the next run decides "joined"
only from evidence a completed join leaves (the Node registered, read with the kubelet's
own credentials), not from kubelet.conf alone. Killed right after kubelet.conf was
written: the node is reset and joins again, once. Killed after the Node registered: the
join stands, no reset, no second join."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable

import pytest
from machine_agent_sandbox.kubeadm.kubelet_start import registrations
from machine_agent_sandbox.sandbox import Sandbox

from tests.e2e.conftest import assert_bootstrapped

pytestmark = pytest.mark.allow_processes


@pytest.mark.parametrize(("when", "resets"), [("kubelet-conf", 1), ("registered", 0)])
def test_a_join_killed_midway_is_redone_or_kept_on_evidence(
        when: str, resets: int, bring_up: Callable[[int], Sandbox]) -> None:
    box = bring_up(1)
    (node,) = box.nodes
    node.workload["failNext"] = [f"killed-after:{when}"]
    node.save_world()
    code, first = node.run("run")
    assert code == -signal.SIGKILL, "\n".join(first)
    assert (node.root / "etc/kubernetes/kubelet.conf").exists()
    journal = json.loads((node.root / "var/lib/machine-agent/journal.json").read_text())
    assert journal["extra"]["join"]["inFlight"]["node"] == node.name
    code, second = node.run("run")
    assert code == 0, "\n".join(second)
    assert_bootstrapped(box, node)
    world = json.loads(node.world.read_text())
    assert world.get("joins", []).count(node.name) == 1
    assert registrations(box.workload.node(node.name)) == 1  # what the kill harness counts
    journal = json.loads((node.root / "var/lib/machine-agent/journal.json").read_text())
    record = journal["extra"]["join"]
    assert "inFlight" not in record
    assert len(record.get("resets", [])) == resets, record.get("resets")
    if resets:
        assert "partly joined" in record["resets"][0]["why"]
