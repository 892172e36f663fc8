"""A node ready to join, and the workload cluster it joins.

The node is a temporary root with what a healthy node shows: /proc files, a container
runtime socket that answers, `kubeadm` and `kubelet` on PATH. The cluster is an API
endpoint listening on 127.0.0.1 and the world file of the kubeadm on PATH (which tokens
it knows, its CA pin, which Nodes exist). Tests only put kubeadm on PATH; what answers is
the stand-in (agent/sandbox/kubeadm_standin.py)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.config import LoadedConfig, default_sources, load_config
from agent.host import Clock, Host
from agent.kube.facts import MachineFacts
from agent.orchestrator import Orchestrator, RunResult
from agent.phases.join import JoinPhase
from agent.report import Condition
from agent.sandbox.kubeadm_standin import install

TOKEN = "abcdef.0123456789abcdef"
FRESH_TOKEN = "ghijkl.0123456789ghijkl"
CA_HASH = "sha256:" + "5e" * 32


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

    def joined(self) -> bool:
        conf = self.file("/etc/kubernetes/kubelet.conf")
        return conf.exists() and f"https://{self.endpoint}" in conf.read_text()

    def clean(self) -> bool:
        return not any(self.file(p).exists() for p in (
            "/etc/kubernetes/kubelet.conf", "/etc/kubernetes/bootstrap-kubelet.conf",
            "/etc/kubernetes/pki/ca.crt", "/var/lib/kubelet/config.yaml",
            "/var/lib/kubelet/kubeadm-flags.env"))


def cloud_config(endpoint: str, token: str = TOKEN, version: str = "v1beta4",
                 pre: tuple[str, ...] = (), post: tuple[str, ...] = ()) -> str:
    """Bootstrap data shaped as CABPK writes it (bootstrap/kubeadm/internal/cloudinit)."""
    args = ("  kubeletExtraArgs:\n  - name: node-ip\n    value: 192.0.2.20\n"
            if version == "v1beta4" else "  kubeletExtraArgs:\n    node-ip: 192.0.2.20\n")
    join = (f"---\napiVersion: kubeadm.k8s.io/{version}\ndiscovery:\n  bootstrapToken:\n"
            f"    apiServerEndpoint: {endpoint}\n    caCertHashes:\n    - {CA_HASH}\n"
            f"    token: {token}\nkind: JoinConfiguration\nnodeRegistration:\n"
            f"{args}  name: '{{{{ ds.meta_data.local_hostname }}}}'\n")
    doc = {
        "write_files": [
            {"path": "/run/kubeadm/kubeadm-join-config.yaml", "owner": "root:root",
             "permissions": "0640", "content": join},
            {"path": "/run/cluster-api/placeholder", "owner": "root:root",
             "permissions": "0640", "content": "This placeholder file is used to create "
                                               "the /run/cluster-api sub directory"},
        ],
        "runcmd": [*pre, "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && "
                         "echo success > /run/cluster-api/bootstrap-success.complete", *post],
    }
    body = yaml.safe_dump(doc, sort_keys=False, width=10000)
    return "## template: jinja\n#cloud-config\n\n" + body


def machine_facts(data: str, version: str = "v1.31.2") -> MachineFacts:
    return MachineFacts("default", "worker-0", "uid-0", "demo", kubernetes_version=version,
                        bootstrap_format="cloud-config", bootstrap_data=data)


@pytest.fixture
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    # A short root: the runtime socket path must fit in sun_path (108 bytes).
    root = tmp_path_factory.mktemp("n")
    tools = tmp_path_factory.mktemp("t")
    files = {"/proc/swaps": "Filename\tType\tSize\tUsed\tPriority\n",
             "/proc/sys/net/ipv4/ip_forward": "1\n",
             "/proc/sys/net/ipv6/conf/default/forwarding": "1\n",
             "/proc/sys/net/bridge/bridge-nf-call-iptables": "1\n",
             "/proc/net/tcp": "  sl  local_address rem_address   st\n"
                              "   0: 0100007F:0CEA 00000000:0000 0A\n",
             "/proc/net/tcp6": "  sl  local_address rem_address   st\n"}
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (root / "var/run/containerd").mkdir(parents=True)
    runtime = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    runtime.bind(str(root / "var/run/containerd/containerd.sock"))
    runtime.listen(8)
    api = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    api.bind(("127.0.0.1", 0))
    api.listen(8)
    endpoint = f"127.0.0.1:{api.getsockname()[1]}"
    world = tools / "world.json"
    world.write_text(json.dumps({"version": "v1.31.2", "tokens": {"abcdef": "0123456789abcdef"},
                                 "caCertHash": CA_HASH}))
    install(tools / "bin", root, world)
    clock = NoSleep()
    host = Host(root, clock=clock, env={"PATH": f"{tools / 'bin'}:/usr/bin:/bin"})
    try:
        yield Node(root, host, world, endpoint, clock)
    finally:
        runtime.close()
        api.close()
