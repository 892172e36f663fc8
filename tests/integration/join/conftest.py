"""A node ready to join, and the workload cluster it joins.

The node is a temporary root with what a healthy node shows: /proc files, a container
runtime socket that answers, `kubeadm` and `kubelet` on PATH. The cluster is an API
stand-in listening on 127.0.0.1, where the kubelet registers its Node, and the world file
of the kubeadm on PATH (which tokens it knows, its CA pin, which Nodes are Ready). Tests
only put kubeadm on PATH; what answers is the stand-in
(machine_agent_sandbox/kubeadm_standin.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from machine_agent_sandbox.apiserver import ApiServer
from machine_agent_sandbox.testkit.node import joinable

from agent.config import LoadedConfig, default_sources, load_config
from agent.host import Clock, Host
from agent.kube.facts import MachineFacts
from agent.orchestrator import Orchestrator, RunResult
from agent.phases.join import JoinPhase
from agent.report import Condition


class NoSleep(Clock):
    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


class Machine:
    """Records the conditions published, as the Machine's status would show them."""

    def __init__(self) -> None:
        self.conditions: dict[str, Condition] = {}

    def publish(self, conditions: list[Condition], final: bool) -> None:
        self.conditions = {c.type: c for c in conditions}


@dataclass
class Node:
    root: Path
    host: Host
    world_path: Path
    endpoint: str
    clock: NoSleep
    api: ApiServer
    """The workload cluster's API."""

    @property
    def world(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.world_path.read_text())
        return doc

    def set_world(self, **changes: Any) -> None:
        self.world_path.write_text(json.dumps({**self.world, **changes}))

    def file(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def configure(self, join: dict[str, Any], **spec: Any) -> LoadedConfig:
        doc = {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
               "spec": {"skipPhases": ["time"], "join": join, **spec}}
        self.host.write_file("/etc/machine-agent/config.yaml", yaml.safe_dump(doc))
        return load_config(self.host, default_sources())

    def run(self, loaded: LoadedConfig, machine: MachineFacts | None = None,
            ) -> tuple[RunResult, Machine]:
        status = Machine()
        result = Orchestrator(loaded, self.host, phases=[JoinPhase()], reporters=[status],
                              machine=machine).run()
        return result, status

    def registered(self, name: str = "worker-0") -> dict[str, Any] | None:
        """The Node on the workload cluster, as an admin sees it; None if there is none."""
        import requests

        resp = requests.get(f"{self.api.url}/api/v1/nodes/{name}", timeout=10,
                            verify=str(self.api.ca_path),
                            headers={"Authorization": f"Bearer {self.api.admin_token}"})
        if resp.status_code == 404:
            return None
        resp.raise_for_status()
        node: dict[str, Any] = resp.json()
        return node

    def joined(self) -> bool:
        conf = self.file("/etc/kubernetes/kubelet.conf")
        return conf.exists() and f"https://{self.endpoint}" in conf.read_text()

    def clean(self) -> bool:
        return not any(self.file(p).exists() for p in (
            "/etc/kubernetes/kubelet.conf", "/etc/kubernetes/bootstrap-kubelet.conf",
            "/etc/kubernetes/pki/ca.crt", "/var/lib/kubelet/config.yaml",
            "/var/lib/kubelet/kubeadm-flags.env"))


def machine_facts(data: str, version: str = "v1.31.2") -> MachineFacts:
    return MachineFacts("default", "worker-0", "uid-0", "demo", kubernetes_version=version,
                        bootstrap_format="cloud-config", bootstrap_data=data)


@pytest.fixture
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    # A short root: the runtime socket path must fit in sun_path (108 bytes).
    root = tmp_path_factory.mktemp("n")
    tools = tmp_path_factory.mktemp("t")
    with joinable(root, tools) as world:
        clock = NoSleep()
        host = Host(root, clock=clock, env={"PATH": f"{world.path}:/usr/bin:/bin"})
        yield Node(root, host, world.world_path, world.endpoint, clock, world.api)
