"""The CNI manifest applied to the management API stand-in acting as the workload
cluster (built-in kinds stored without schema, SSA with managedFields), then the wait for
the Node: it turns Ready while the agent waits, as when the CNI DaemonSet starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import requests
import yaml
from machine_agent_sandbox.apiserver import ApiServer

from agent.config import load_config
from agent.config.sources import FileSource
from agent.host import Clock, Host
from agent.orchestrator import Orchestrator
from agent.phases.cni import CNIPhase
from agent.report import Condition
from tests.cni_fixtures import sha256

MANIFEST = """\
apiVersion: v1
kind: Namespace
metadata: {name: kube-flannel}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: flannel, namespace: kube-flannel}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: flannel}
rules: [{apiGroups: [""], resources: [nodes], verbs: [list, watch]}]
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


class FastClock(Clock):
    def sleep(self, seconds: float) -> None:
        super().sleep(min(seconds, 0.05))


def admin(api: ApiServer, method: str, path: str, body: Any = None,
          content_type: str = "application/json") -> requests.Response:
    return requests.request(method, f"{api.url}{path}", json=body, verify=str(api.ca_path),
                            headers={"Authorization": f"Bearer {api.admin_token}",
                                     "Content-Type": content_type}, timeout=10)


class TurnsReady:
    """Marks the Node Ready the first time the agent says it is waiting for it."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.waits: list[str] = []

    def publish(self, conditions: list[Condition], final: bool) -> None:
        for c in conditions:
            if c.type == "CNIReady" and c.message.startswith("waiting for Node"):
                self.waits.append(c.message)
                if len(self.waits) == 1:
                    resp = admin(self.api, "PATCH",
                                 "/api/v1/nodes/node-1/status?fieldManager=kubelet",
                                 {"apiVersion": "v1", "kind": "Node",
                                  "metadata": {"name": "node-1"},
                                  "status": {"conditions": [{
                                      "type": "Ready", "status": "True",
                                      "reason": "KubeletReady",
                                      "message": "kubelet is posting ready status"}]}},
                                 "application/apply-patch+yaml")
                    assert resp.status_code == 200, resp.text


def test_manifest_lands_in_the_workload_cluster_and_the_node_becomes_ready(
        tmp_path: Path) -> None:
    with ApiServer(tmp_path / "apiserver") as api:
        created = admin(api, "POST", "/api/v1/nodes",
                        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
        assert created.status_code == 201, created.text
        root = tmp_path / "root"
        (root / "etc/kubernetes").mkdir(parents=True)
        (root / "etc/kubernetes/admin.conf").write_text(api.kubeconfig())
        (root / "srv").mkdir()
        (root / "srv/cni.yaml").write_text(MANIFEST)
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
            "spec": {"cni": {"manifest": {"file": "/srv/cni.yaml", "nodeName": "node-1",
                                          "apply": "always",
                                          "sha256": sha256(MANIFEST.encode()),
                                          "readyTimeout": "30s"}}}}))
        host = Host(root, clock=FastClock())
        loaded = load_config(host, [FileSource(str(config), required=True,
                                               outside_root=True)])
        node = TurnsReady(api)
        result = Orchestrator(loaded, host, phases=[CNIPhase()], reporters=[node]).run()
        assert result.ok, result.outcomes
        assert result.outcomes[0].message == "Node node-1 is Ready"
        assert node.waits[0].startswith(
            "waiting for Node node-1 to be Ready (the Node has no Ready condition yet")
        ds = admin(api, "GET", "/apis/apps/v1/namespaces/kube-flannel/daemonsets/"
                               "kube-flannel-ds").json()
        assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "flannel:v0.26"
        managers = {m["manager"] for m in ds["metadata"]["managedFields"]}
        assert managers == {"machine-agent"}
        role = admin(api, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/flannel")
        assert role.json()["rules"][0]["verbs"] == ["list", "watch"]
        version = ds["metadata"]["resourceVersion"]
        # applying the same manifest again converges: nothing changes in the cluster
        (root / "var/lib/machine-agent/journal.json").unlink()
        assert Orchestrator(loaded, host, phases=[CNIPhase()]).run().ok
        again = admin(api, "GET", "/apis/apps/v1/namespaces/kube-flannel/daemonsets/"
                                  "kube-flannel-ds").json()
        assert again["metadata"]["resourceVersion"] == version
