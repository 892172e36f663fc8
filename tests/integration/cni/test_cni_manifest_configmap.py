"""The CNI manifest from a ConfigMap on the management cluster, read with the node's own
least-privilege identity, applied by the first control-plane node only: `plan` says which
node applies it and why, from the Machine's label and its Cluster's initialization."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from machine_agent_sandbox.apiserver import ApiServer

from agent.kube.rbac import NodeIdentity, render_node_rbac

NS, CLUSTER, CONFIGMAP = "site-a", "c1", "cni-manifest"
CAPI = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{NS}"
MANIFEST = """\
apiVersion: v1
kind: Namespace
metadata: {name: kube-flannel}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-flannel-ds, namespace: kube-flannel}
spec:
  selector: {matchLabels: {app: flannel}}
  template:
    metadata: {labels: {app: flannel}}
    spec: {containers: [{name: kube-flannel, image: "flannel:v0.26"}]}
"""


class Cluster:
    """The stand-in as management cluster (Cluster, Machines, the ConfigMap) and as the
    workload cluster the manifest goes to (its admin kubeconfig)."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api

    def call(self, method: str, path: str, body: Any = None,
             content_type: str = "application/json") -> Any:
        resp = requests.request(method, f"{self.api.url}{path}", json=body,
                                verify=str(self.api.ca_path), timeout=10,
                                headers={"Authorization": f"Bearer {self.api.admin_token}",
                                         "Content-Type": content_type})
        assert resp.status_code in (200, 201, 404), f"{method} {path}: {resp.text}"
        return resp.json()

    def machine(self, name: str, labels: dict[str, str]) -> None:
        self.call("POST", f"{CAPI}/machines", {
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"clusterName": CLUSTER, "bootstrap": {"dataSecretName": f"{name}-b"},
                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                           "kind": "Metal3Machine", "name": name}}})
        self.call("POST", f"/api/v1/namespaces/{NS}/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-b"},
            "stringData": {"value": "#cloud-config\n", "format": "cloud-config"}})

    def node_identity(self, machine: str) -> str:
        """A token bound to exactly the shipped RBAC rendered for `machine`."""
        sa = f"machine-agent-{machine}"
        rbac = render_node_rbac(NodeIdentity(NS, machine, CLUSTER, f"{machine}-b", sa,
                                             cni_manifest_configmap=CONFIGMAP))
        for doc in yaml.safe_load_all(rbac):
            plural = "roles" if doc["kind"] == "Role" else "rolebindings"
            self.call("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/{plural}",
                      doc)
        return self.api.make_service_account_token(NS, sa)

    def daemonset(self) -> Any:
        return self.call("GET", "/apis/apps/v1/namespaces/kube-flannel/daemonsets/"
                                "kube-flannel-ds")


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    with ApiServer(tmp_path / "apiserver") as api:
        c = Cluster(api)
        c.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": NS}})
        c.call("POST", f"{CAPI}/clusters", {
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": CLUSTER, "namespace": NS},
            "spec": {"controlPlaneEndpoint": {"host": "203.0.113.10", "port": 6443}}})
        c.call("POST", f"/api/v1/namespaces/{NS}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIGMAP},
            "data": {"flannel.yaml": MANIFEST}})
        c.call("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                         "metadata": {"name": "node-1"}})
        c.call("PATCH", "/api/v1/nodes/node-1/status?fieldManager=kubelet", {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                                       "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status"}]}},
            "application/apply-patch+yaml")
        yield c


def node_root(tmp_path: Path, cluster: Cluster, machine: str) -> Path:
    root = tmp_path / machine
    (root / "etc/machine-agent").mkdir(parents=True)
    (root / "etc/kubernetes").mkdir(parents=True)
    (root / "etc/kubernetes/admin.conf").write_text(cluster.api.kubeconfig())
    (root / "etc/machine-agent/management.kubeconfig").write_text(
        cluster.api.kubeconfig(token=cluster.node_identity(machine)))
    (root / "etc/machine-agent/config.yaml").write_text(yaml.safe_dump({
        "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
        "spec": {"identity": {"machine": {"namespace": NS, "name": machine}},
                 "management": {"kubeconfig": "/etc/machine-agent/management.kubeconfig"},
                 "cni": {"manifest": {"configMapRef": {"name": CONFIGMAP,
                                                       "key": "flannel.yaml"},
                                      "nodeName": "node-1"}}}}))
    return root


def agent(root: Path, command: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from agent.cli import main

    code = main(["--root", str(root), command, "--only", "cni"])
    return code, capsys.readouterr().out


def test_the_first_control_plane_node_applies_the_manifest_from_the_configmap(
        tmp_path: Path, cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster.machine("cp-0", {"cluster.x-k8s.io/control-plane": ""})
    root = node_root(tmp_path, cluster, "cp-0")
    code, out = agent(root, "plan", capsys)
    assert code == 0
    assert (f"  * CNI manifest applied by this node: Machine {NS}/cp-0 is labelled "
            f"cluster.x-k8s.io/control-plane and Cluster {NS}/{CLUSTER}'s control plane is "
            "not initialized yet: the first control-plane node") in out
    assert (f"  ~ server-side apply 2 object(s) from ConfigMap {NS}/{CONFIGMAP} key "
            "flannel.yaml to the workload cluster") in out
    assert cluster.daemonset().get("kind") == "Status"  # plan applied nothing
    code, out = agent(root, "run", capsys)
    assert code == 0, out
    ds = cluster.daemonset()
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "flannel:v0.26"
    # CAPI now marks the control plane initialized; this node still owns the manifest
    cluster.call("PATCH", f"{CAPI}/clusters/{CLUSTER}/status?fieldManager=capi&force=true", {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": NS},
        "status": {"initialization": {"controlPlaneInitialized": True}}},
        "application/apply-patch+yaml")
    code, out = agent(root, "plan", capsys)
    assert "  * CNI manifest applied by this node: this node applied it before" in out


def test_later_control_plane_nodes_and_workers_do_not_apply_it(
        tmp_path: Path, cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster.call("PATCH", f"{CAPI}/clusters/{CLUSTER}/status?fieldManager=capi&force=true", {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": NS},
        "status": {"initialization": {"controlPlaneInitialized": True}}},
        "application/apply-patch+yaml")
    cluster.machine("cp-1", {"cluster.x-k8s.io/control-plane": ""})
    cluster.machine("worker-0", {})
    for machine, why in (
            ("cp-1", f"Cluster {NS}/{CLUSTER}'s control plane is already initialized: this "
                     "is not the first control-plane node"),
            ("worker-0", f"Machine {NS}/worker-0 is a worker (no label "
                         "cluster.x-k8s.io/control-plane): workers never apply it")):
        root = node_root(tmp_path, cluster, machine)
        code, out = agent(root, "plan", capsys)
        assert code == 0
        assert f"  * CNI manifest not applied by this node: {why}" in out
        assert "server-side apply" not in out
        code, out = agent(root, "run", capsys)
        assert code == 0, out
        assert cluster.daemonset().get("kind") == "Status"  # not in the workload cluster
