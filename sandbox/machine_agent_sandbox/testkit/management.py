"""A management cluster for the agent's tests and benchmarks: administrator access to
the stand-in (machine_agent_sandbox.apiserver) or to a real API server (an admin
kubeconfig named by MACHINE_AGENT_TEST_KUBECONFIG, CAPI CRDs installed), and a namespace
seeded with a Cluster, a Machine (CAPI's own `Ready` condition set by another field
manager), the bootstrap data Secret, the agent's ConfigMap, and a node identity bound to
exactly the shipped RBAC (templates/rbac/node-rbac.yaml)."""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import requests
import yaml

from agent.host import Clock
from agent.kube.rbac import NodeIdentity, render_node_rbac
from agent.phases import registry
from machine_agent_sandbox.testkit.bootstrap import bootstrap_secret as secret_holding
from machine_agent_sandbox.testkit.bootstrap import cloud_config

REAL_KUBECONFIG = os.environ.get("MACHINE_AGENT_TEST_KUBECONFIG", "")
MACHINE, CLUSTER, SECRET, CONFIGMAP = "worker-0", "c1", "worker-0-bootstrap", "worker-0-agent"
HOST_UUID = "4c4c4544-0042-3510-8051-b7c04f565a31"
CAPI_MANAGER = "capi-machine-controller"
PHASE_CONDITIONS = registry.conditions()
"""The conditions the phases set, from the registry."""
NODE_CONFIG = """apiVersion: machine-agent.io/v1alpha1
kind: AgentConfig
spec:
  identity: {identity}
  management:
    kubeconfig: /etc/machine-agent/management.kubeconfig
  retry: {{attempts: 4, initialDelay: 100ms, maxDelay: 1s}}
"""


class FastClock(Clock):
    """Real time, but waits are 20 times shorter; records what was asked for."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        super().sleep(seconds / 20)


@dataclass
class Admin:
    """Raw API access as an administrator (what `kubectl` would show)."""

    server: str
    verify: str | bool
    headers: dict[str, str]
    cert: tuple[str, str] | None = None
    ns: str = ""
    session: requests.Session = field(default_factory=requests.Session)

    def call(self, method: str, path: str, body: Any = None, *, params: Any = None,
             content_type: str = "application/json", ok: tuple[int, ...] = (200, 201)
             ) -> Any:
        r = self.session.request(method, self.server + path, params=params,
                                 data=json.dumps(body) if body is not None else None,
                                 headers={**self.headers, "Content-Type": content_type},
                                 verify=self.verify, cert=self.cert, timeout=10)
        assert r.status_code in ok, f"{method} {path}: {r.status_code} {r.text}"
        return r.json()

    def create(self, path: str, body: Any) -> Any:
        return self.call("POST", path, body)

    def apply(self, path: str, body: Any, manager: str) -> Any:
        return self.call("PATCH", path, body, params={"fieldManager": manager, "force": "true"},
                         content_type="application/apply-patch+yaml")

    def machine(self) -> Any:
        """The Machine's raw JSON, as `kubectl get machine -o json` shows it."""
        return self.call("GET", f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{self.ns}"
                                f"/machines/{MACHINE}")

    def conditions(self) -> dict[str, dict[str, Any]]:
        return {c["type"]: c for c in self.machine().get("status", {}).get("conditions", [])}

    def events(self) -> list[dict[str, Any]]:
        items = self.call("GET", f"/apis/events.k8s.io/v1/namespaces/{self.ns}/events")["items"]
        return [e for e in items if e.get("regarding", {}).get("name") == MACHINE]


def real_admin() -> Admin:
    """Administrator access as the kubeconfig MACHINE_AGENT_TEST_KUBECONFIG says."""
    config = yaml.safe_load(Path(REAL_KUBECONFIG).read_text())
    ctx = next(c["context"] for c in config["contexts"]
               if c["name"] == config["current-context"])
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == ctx["user"])
    base = Path(REAL_KUBECONFIG).parent
    work = Path(os.environ.get("PYTEST_TMPDIR", base))

    def material(section: dict[str, Any], key: str, name: str) -> str | None:
        if section.get(f"{key}-data"):
            target = work / name
            target.write_bytes(base64.b64decode(section[f"{key}-data"]))
            return str(target)
        return str(base / section[key]) if section.get(key) else None

    headers = {"Authorization": f"Bearer {user['token']}"} if user.get("token") else {}
    crt, key = material(user, "client-certificate", "admin.crt"), \
        material(user, "client-key", "admin.key")
    return Admin(cluster["server"], material(cluster, "certificate-authority", "ca.crt") or True,
                 headers, (crt, key) if crt and key else None)


@dataclass
class World:
    """The node's root, already healthy and joinable, and the workload cluster's endpoint."""

    root: Path
    endpoint: str
    world_path: Path | None = None
    """The kubeadm stand-in's world file (which tokens the workload cluster knows)."""


def seed(admin: Admin, world: World, *, labels: dict[str, str] | None = None,
         secret_name: str | None = SECRET) -> None:
    """Cluster, Machine (with CAPI's Ready), bootstrap Secret, the agent's ConfigMap."""
    ns, capi = admin.ns, f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{admin.ns}"
    admin.create(f"{capi}/clusters", {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": ns},
        "spec": {"controlPlaneEndpoint": {"host": "203.0.113.10", "port": 6443}}})
    bootstrap: dict[str, Any] = {"dataSecretName": secret_name} if secret_name else {}
    admin.create(f"{capi}/machines", {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": MACHINE, "namespace": ns, "labels": labels or {},
                     "annotations": {"machine-agent.io/config": f"configmap/{CONFIGMAP}"}},
        "spec": {"clusterName": CLUSTER, "version": "v1.31.2", "bootstrap": bootstrap,
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                       "kind": "Metal3Machine", "name": MACHINE}}})
    admin.apply(f"{capi}/machines/{MACHINE}/status", {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": MACHINE, "namespace": ns},
        "status": {"conditions": [{
            "type": "Ready", "status": "False", "reason": "NotReady",
            "message": "waiting for the node", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        CAPI_MANAGER)
    if secret_name:
        admin.create(f"/api/v1/namespaces/{ns}/secrets", bootstrap_secret(ns, world.endpoint))
    admin.create(f"/api/v1/namespaces/{ns}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP, "namespace": ns},
        "data": {"config.yaml": "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"
                                "spec:\n  time:\n    maxOffset: 250ms\n"}})


def bootstrap_secret(ns: str, endpoint: str) -> dict[str, Any]:
    """The Machine's bootstrap data Secret, joining the workload cluster at `endpoint`."""
    return secret_holding(ns, SECRET, cloud_config(endpoint))


def node_token(admin: Admin, *, discovery: bool = False) -> str:
    """A ServiceAccount token bound to exactly the shipped RBAC, rendered for this node."""
    sa = f"machine-agent-{MACHINE}"
    rbac = render_node_rbac(NodeIdentity(
        admin.ns, MACHINE, CLUSTER, SECRET, sa, config_kind="configmap",
        config_name=CONFIGMAP, discovery=discovery))
    for doc in yaml.safe_load_all(rbac):
        plural = "roles" if doc["kind"] == "Role" else "rolebindings"
        admin.create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{admin.ns}/{plural}", doc)
    return service_account_token(admin, sa)


def service_account_token(admin: Admin, name: str) -> str:
    """A new ServiceAccount `name` in the test's namespace and a token for it from the
    TokenRequest API (the same calls against the stand-in and a real server). Its RBAC
    is whatever binds it: none, unless the caller made some."""
    admin.create(f"/api/v1/namespaces/{admin.ns}/serviceaccounts", {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": admin.ns}})
    review = admin.create(f"/api/v1/namespaces/{admin.ns}/serviceaccounts/{name}/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    return str(review["status"]["token"])


def revoke_service_account(admin: Admin, name: str, token: str, wait: float = 60.0) -> None:
    """Delete the ServiceAccount `name`, which invalidates its bound tokens, and wait,
    bounded, until the server refuses `token` with 401. A real kube-apiserver caches a
    token's successful authentication for 10 s (its default TokenSuccessCacheTTL) and
    reads ServiceAccounts through an informer, so the refusal comes up to ~10 s later
    there; the stand-in refuses at once. (The admin's client certificate, if any, is not
    sent: it would authenticate the request instead of the token.)"""
    admin.call("DELETE", f"/api/v1/namespaces/{admin.ns}/serviceaccounts/{name}")
    deadline = time.monotonic() + wait
    while True:
        answer = admin.session.get(
            f"{admin.server}/apis/cluster.x-k8s.io/v1beta2/namespaces/{admin.ns}/machines",
            headers={"Authorization": f"Bearer {token}"}, verify=admin.verify, timeout=10)
        if answer.status_code == 401:
            return
        assert time.monotonic() < deadline, \
            f"the token of the deleted ServiceAccount {name} still answers " \
            f"{answer.status_code} after {wait:g}s"
        time.sleep(0.2)


@dataclass
class Node:
    """The node's root directory, configured to reach the management cluster."""

    root: Path
    admin: Admin

    def write(self, path: str, text: str) -> None:
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


class Proxy(Protocol):
    """A proxy in front of the server (the tests' fault proxy): its URL and its CA."""

    url: str
    ca_path: Path


def make_node(world: World, admin: Admin, token: str, *, by_uuid: bool = False,
              via: Proxy | None = None) -> Node:
    """The node's configuration; `via` puts a proxy between it and the server."""
    node = Node(world.root, admin)
    ca = ""
    verify = str(via.ca_path) if via is not None else admin.verify
    if isinstance(verify, str):
        ca = base64.b64encode(Path(verify).read_bytes()).decode()
    cluster: dict[str, Any] = {"server": via.url if via is not None else admin.server}
    if ca:
        cluster["certificate-authority-data"] = ca
    node.write("/etc/machine-agent/management.kubeconfig", yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "node",
        "clusters": [{"name": "mgmt", "cluster": cluster}],
        "users": [{"name": "node", "user": {"token": token}}],
        "contexts": [{"name": "node", "context": {"cluster": "mgmt", "user": "node"}}]}))
    identity = (f"{{discovery: {{namespace: {admin.ns}}}}}" if by_uuid
                else f"{{machine: {{namespace: {admin.ns}, name: {MACHINE}}}}}")
    node.write("/etc/machine-agent/config.yaml", NODE_CONFIG.format(identity=identity))
    node.write("/sys/class/dmi/id/product_uuid", HOST_UUID.upper() + "\n")
    return node
