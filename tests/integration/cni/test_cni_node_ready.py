"""On a joined node, the cni phase waits for the kubelet to turn the Node Ready once the
configuration list is in place, and reports the Node's Ready condition onto the Machine
under the agent's own condition type — only once it is True.

The node joins with the kubeadm stand-in (its kubelet registers the Node NotReady on the
workload API stand-in); the kubelet's turn to Ready is the sandbox kubelet's
(`kubelet_ready`), done the first time the agent says it is waiting."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from machine_agent_sandbox.kubeadm.kubelet_start import kubelet_ready
from machine_agent_sandbox.testkit.bootstrap import cloud_config
from machine_agent_sandbox.testkit.node import JoinWorld, joinable

from agent.config import default_sources, load_config
from agent.host import Clock, Host
from agent.orchestrator import Orchestrator
from agent.phases.cni import CNIPhase
from agent.phases.join import JoinPhase
from agent.report import Condition
from tests.cni_fixtures import CHAIN
from tests.integration.join.conftest import machine_facts


class NoSleep(Clock):
    def sleep(self, seconds: float) -> None:
        pass


class Machine:
    """The Machine's conditions as published; the kubelet turns Ready once asked to."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conditions: dict[str, Condition] = {}
        self.while_waiting: set[str] | None = None

    def publish(self, conditions: list[Condition], final: bool) -> None:
        self.conditions = {c.type: c for c in conditions}
        cni = self.conditions.get("CNIReady")
        if cni and cni.message.startswith("waiting for Node") and self.while_waiting is None:
            self.while_waiting = set(self.conditions)
            assert kubelet_ready(self.root)


@pytest.fixture
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, JoinWorld]]:
    root = tmp_path_factory.mktemp("n")
    with joinable(root, tmp_path_factory.mktemp("t"), kubelet=False) as joined:
        yield root, joined


def test_the_node_turns_ready_after_the_list_and_its_condition_is_reported(
        world: tuple[Path, JoinWorld]) -> None:
    root, joined = world
    for plugin in CHAIN:  # the chain's binaries; the ADD/CHECK/DEL proof is tested elsewhere
        (root / "opt/cni/bin").mkdir(parents=True, exist_ok=True)
        (root / "opt/cni/bin" / plugin).write_text("#!/bin/sh\n")
        (root / "opt/cni/bin" / plugin).chmod(0o755)
    (root / "etc/machine-agent").mkdir(parents=True, exist_ok=True)
    (root / "etc/machine-agent/config.yaml").write_text(yaml.safe_dump({
        "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
        "spec": {"skipPhases": ["time"],
                 "join": {"bootstrapDataFile": "/etc/machine-agent/bootstrap.yaml"},
                 "cni": {"conflist": {"template": "bridge",
                                      "values": {"subnet": "203.0.113.128/25"}},
                         "check": {"enabled": False}, "readyTimeout": "1m"}}}))
    host = Host(root, clock=NoSleep(), env={"PATH": f"{joined.path}:/usr/bin:/bin"})
    machine = Machine(root)
    result = Orchestrator(load_config(host, default_sources()), host,
                          phases=[JoinPhase(), CNIPhase()], reporters=[machine],
                          machine=machine_facts(cloud_config(joined.endpoint))).run()
    assert result.ok, result.outcomes
    assert machine.while_waiting is not None, "the agent never waited for the Node"
    assert "WorkloadNodeReady" not in machine.while_waiting  # not before it is True
    ready = machine.conditions["WorkloadNodeReady"]
    assert (ready.status, ready.reason) == ("True", "KubeletReady")
    assert ready.message == "Node worker-0 is Ready (KubeletReady): kubelet is posting " \
                            "ready status"
    assert machine.conditions["CNIReady"].message.endswith("Node worker-0 is Ready")
    assert machine.conditions["NodeJoined"].message.endswith("; Node worker-0 registered")
    # CAPI's own types stay CAPI's: the agent sets none of them
    assert not {"Ready", "NodeReady", "NodeHealthy"} & set(machine.conditions)
    # an up-to-date run reports it again, from the journal (this run keeps no status file)
    again = Machine(root)
    rerun = Orchestrator(load_config(host, default_sources()), host,
                         phases=[JoinPhase(), CNIPhase()], reporters=[again],
                         machine=machine_facts(cloud_config(joined.endpoint))).run()
    assert [o.outcome for o in rerun.outcomes] == ["up-to-date", "up-to-date"]
    assert again.conditions["WorkloadNodeReady"].message == ready.message
