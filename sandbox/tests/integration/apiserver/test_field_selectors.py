"""Field selectors a type adds to metadata.name and metadata.namespace, as kube-apiserver's
per-type attributes: a drain (kubectl's, Cluster API's) lists a Node's Pods by
spec.nodeName; a type without the field refuses it."""

from __future__ import annotations

from sandbox.tests.integration.apiserver.kubeclient import CAPI, Kube


def pod(name: str, node: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}}


def test_pods_are_listed_by_the_node_they_run_on(admin: Kube, ns: str) -> None:
    for name, node in (("a", "worker-0"), ("b", "worker-1"), ("c", "worker-0")):
        admin.check(admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod(name, node)), 201)
    listed = admin.check(admin.get(f"/api/v1/namespaces/{ns}/pods",
                                   params={"fieldSelector": "spec.nodeName=worker-0"}), 200)
    assert sorted(p["metadata"]["name"] for p in listed["items"]) == ["a", "c"]
    others = admin.check(admin.get(f"/api/v1/namespaces/{ns}/pods",
                                   params={"fieldSelector": "spec.nodeName!=worker-0"}), 200)
    assert [p["metadata"]["name"] for p in others["items"]] == ["b"]


def test_a_type_without_the_field_refuses_it(admin: Kube, ns: str) -> None:
    body = admin.check(admin.get(f"{CAPI}/namespaces/{ns}/machines",
                                 params={"fieldSelector": "spec.nodeName=worker-0"}), 400)
    assert body["reason"] == "BadRequest"
    assert body["message"] == "field label not supported: spec.nodeName"
