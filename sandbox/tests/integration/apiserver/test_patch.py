"""PATCH flavours and server-side apply ownership of `status.conditions`."""

from __future__ import annotations

from typing import Any

from sandbox.tests.integration.apiserver.kubeclient import (
    CAPI,
    JSON_PATCH,
    Kube,
    condition,
    machine,
)

Obj = dict[str, Any]


def _machine(admin: Kube, ns: str) -> str:
    admin.check(admin.post(f"{CAPI}/namespaces/{ns}/machines", json=machine()), 201)
    return f"{CAPI}/namespaces/{ns}/machines/worker-0"


def _apply_body(*conditions: Obj) -> Obj:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "worker-0"}, "status": {"conditions": list(conditions)}}


def _types(obj: Obj) -> list[str]:
    return [c["type"] for c in obj.get("status", {}).get("conditions", [])]


def test_a_merge_patch_on_conditions_wipes_entries_of_others_but_apply_keeps_them(
        admin: Kube, ns: str) -> None:
    path = _machine(admin, ns) + "/status"
    admin.check(admin.patch(path, {"status": {"conditions": [condition("Ready")]}},
                            params={"fieldManager": "capi"}), 200)
    applied = admin.check(admin.apply(path, _apply_body(condition("AgentReady")),
                                      "machine-agent"), 200)
    assert _types(applied) == ["Ready", "AgentReady"]
    merged = admin.check(admin.patch(path, {"status": {"conditions": [
        condition("AgentReady", "False", "Joining")]}}), 200)
    assert _types(merged) == ["AgentReady"]


def test_apply_that_changes_a_field_owned_by_another_manager_conflicts(
        admin: Kube, ns: str) -> None:
    path = _machine(admin, ns) + "/status"
    admin.check(admin.apply(path, _apply_body(condition("Ready")), "capi"), 200)
    body = _apply_body(condition("AgentReady"), condition("Ready", "False", "NotYet"))
    reply = admin.check(admin.apply(path, body, "machine-agent"), 409)
    assert reply["reason"] == "Conflict"
    fields = sorted(c["field"] for c in reply["details"]["causes"])
    assert fields == ['.status.conditions[type="Ready"].reason',
                      '.status.conditions[type="Ready"].status']
    assert {c["reason"] for c in reply["details"]["causes"]} == {"FieldManagerConflict"}
    assert reply["message"].startswith("Apply failed with 2 conflicts: conflicts with \"capi\"")
    forced = admin.check(admin.apply(path, body, "machine-agent", force=True), 200)
    ready = next(c for c in forced["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"


def test_applying_the_same_values_as_another_manager_shares_ownership(
        admin: Kube, ns: str) -> None:
    path = _machine(admin, ns) + "/status"
    admin.check(admin.apply(path, _apply_body(condition("Ready")), "capi"), 200)
    shared = admin.check(admin.apply(path, _apply_body(condition("Ready")), "machine-agent"),
                         200)
    managers = {e["manager"] for e in shared["metadata"]["managedFields"]}
    assert {"capi", "machine-agent"} <= managers


def test_entries_the_applier_owned_and_now_omits_are_removed(admin: Kube, ns: str) -> None:
    path = _machine(admin, ns) + "/status"
    admin.check(admin.apply(path, _apply_body(condition("Ready")), "capi"), 200)
    admin.check(admin.apply(path, _apply_body(condition("NetworkReady"),
                                              condition("TimeReady")), "machine-agent"), 200)
    after = admin.check(admin.apply(path, _apply_body(condition("TimeReady")),
                                    "machine-agent"), 200)
    assert _types(after) == ["Ready", "TimeReady"]


def test_apply_without_a_field_manager_is_422(admin: Kube, ns: str) -> None:
    path = _machine(admin, ns) + "/status"
    resp = admin.patch(path, _apply_body(condition("Ready")), "application/apply-patch+yaml")
    reply = admin.check(resp, 422)
    assert "fieldManager: Required value" in reply["message"]


def test_apply_creates_a_missing_object(admin: Kube, ns: str) -> None:
    body = machine("worker-9")
    created = admin.check(admin.apply(f"{CAPI}/namespaces/{ns}/machines/worker-9", body,
                                      "machine-agent"), 201)
    assert created["metadata"]["managedFields"][0]["operation"] == "Apply"


def test_strategic_merge_patch_is_415_for_custom_resources(admin: Kube, ns: str) -> None:
    path = _machine(admin, ns)
    reply = admin.check(admin.patch(path, {"metadata": {"labels": {"a": "b"}}},
                                    "application/strategic-merge-patch+json"), 415)
    assert reply["reason"] == "UnsupportedMediaType"


def test_json_patch_applies_operations_and_a_failed_test_is_422(admin: Kube, ns: str) -> None:
    path = _machine(admin, ns)
    patched = admin.check(admin.patch(path, [
        {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}},
        {"op": "replace", "path": "/spec/clusterName", "value": "other"}], JSON_PATCH), 200)
    assert patched["metadata"]["labels"] == {"a": "b"}
    assert patched["spec"]["clusterName"] == "other"
    admin.check(admin.patch(path, [{"op": "test", "path": "/spec/clusterName",
                                    "value": "nope"}], JSON_PATCH), 422)


def test_a_merge_patch_with_a_stale_resource_version_conflicts(admin: Kube, ns: str) -> None:
    path = _machine(admin, ns)
    rv = admin.check(admin.get(path), 200)["metadata"]["resourceVersion"]
    admin.check(admin.patch(path, {"metadata": {"labels": {"a": "b"}}}), 200)
    reply = admin.check(admin.patch(path, {"metadata": {"resourceVersion": rv,
                                                        "labels": {"a": "c"}}}), 409)
    assert reply["reason"] == "Conflict"
