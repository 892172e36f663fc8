"""DELETE with protobuf DeleteOptions, as controller-runtime's clients send them for
built-in kinds (Cluster API's Machine deletion deletes the Node so). The bodies are what
client-go's protobuf serializer wrote (k8s.io/apimachinery v0.36, recorded as hex)."""

from __future__ import annotations

from sandbox.tests.integration.apiserver.kubeclient import Kube

PROTOBUF = "application/vnd.kubernetes.protobuf"
EMPTY = bytes.fromhex("6b3873000a130a027631120d44656c6574654f7074696f6e7312001a002200")
"""metav1.DeleteOptions{}, what a plain client.Delete sends."""
FOREGROUND_DRY_RUN = bytes.fromhex(
    "6b3873000a130a027631120d44656c6574654f7074696f6e7312400800122b0a2436626137303662392d"
    "326335382d343838392d623262322d6532313363666333353964611203323837220a466f726567726f75"
    "6e642a03416c6c1a002200")
"""gracePeriodSeconds 0, preconditions uid 6ba706b9-... resourceVersion 287, propagation
Foreground, dryRun All."""


def configmap(ns: str, name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name,
                                                                  "namespace": ns}}


def test_a_protobuf_delete_deletes(admin: Kube, ns: str) -> None:
    admin.check(admin.post(f"/api/v1/namespaces/{ns}/configmaps", json=configmap(ns, "a")),
                201)
    gone = admin.check(admin.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/a",
                                     data=EMPTY, headers={"Content-Type": PROTOBUF}), 200)
    assert gone["status"] == "Success"
    admin.check(admin.get(f"/api/v1/namespaces/{ns}/configmaps/a"), 404)
    again = admin.check(admin.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/a",
                                      data=EMPTY, headers={"Content-Type": PROTOBUF}), 404)
    assert again["reason"] == "NotFound"


def test_protobuf_options_are_read_as_json_ones_would_be(admin: Kube, ns: str) -> None:
    admin.check(admin.post(f"/api/v1/namespaces/{ns}/configmaps", json=configmap(ns, "b")),
                201)
    # the preconditions' uid is not this object's: refused as a JSON body would be
    refused = admin.check(admin.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/b",
                                        data=FOREGROUND_DRY_RUN,
                                        headers={"Content-Type": PROTOBUF}), 409)
    assert refused["reason"] == "Conflict"
    assert "the UID in the precondition (6ba706b9-2c58-4889-b2b2-e213cfc359da) does not " \
        "match" in refused["message"]
    admin.check(admin.get(f"/api/v1/namespaces/{ns}/configmaps/b"), 200)
