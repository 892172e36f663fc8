"""The sandbox kubelet's Node status carries the conditions a real kubelet posts
(pkg/kubelet/nodestatus/setters.go): Cluster API's Machine controller reads MemoryPressure,
DiskPressure and PIDPressure besides Ready for the Machine's NodeHealthy, and holds it
Unknown ("Condition not yet reported") while any is missing."""

from __future__ import annotations

from pathlib import Path

from machine_agent_sandbox.apiserver import ApiServer
from machine_agent_sandbox.kubeadm.kubelet_start import post_node_status

from sandbox.tests.integration.apiserver.kubeclient import Kube


def test_a_ready_kubelet_posts_ready_and_no_pressure(own_standin: ApiServer, admin: Kube) -> None:
    admin.check(admin.post("/api/v1/nodes", json={
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-0"}}), 201)
    post_node_status(own_standin.url, Path(own_standin.ca_path).read_text(),
                     own_standin.admin_token, "worker-0", True)
    node = admin.check(admin.get("/api/v1/nodes/worker-0"), 200)
    seen = {c["type"]: (c["status"], c["reason"]) for c in node["status"]["conditions"]}
    assert seen == {"MemoryPressure": ("False", "KubeletHasSufficientMemory"),
                    "DiskPressure": ("False", "KubeletHasNoDiskPressure"),
                    "PIDPressure": ("False", "KubeletHasSufficientPID"),
                    "Ready": ("True", "KubeletReady")}
