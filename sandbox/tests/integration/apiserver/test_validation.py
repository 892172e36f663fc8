"""Schema validation from the real CRDs: 422 Invalid with causes, pruning, Strict."""

from __future__ import annotations

from sandbox.tests.integration.apiserver.kubeclient import (
    CAPI,
    IPAM,
    Kube,
    claim,
    condition,
    machine,
)


def test_a_claim_missing_pool_api_group_is_422_with_a_cause(admin: Kube, ns: str) -> None:
    body = claim("c-0")
    del body["spec"]["poolRef"]["apiGroup"]
    reply = admin.check(admin.post(f"{IPAM}/namespaces/{ns}/ipaddressclaims", json=body), 422)
    assert reply["reason"] == "Invalid"
    assert reply["message"] == (
        'IPAddressClaim.ipam.cluster.x-k8s.io "c-0" is invalid: '
        "spec.poolRef.apiGroup: Required value")
    assert reply["details"]["causes"] == [{"reason": "FieldValueRequired",
                                           "message": "Required value",
                                           "field": "spec.poolRef.apiGroup"}]
    assert reply["details"]["kind"] == "IPAddressClaim"


def test_condition_values_are_checked_against_the_schema(admin: Kube, ns: str) -> None:
    path = f"{CAPI}/namespaces/{ns}/machines/worker-0/status"
    admin.check(admin.post(f"{CAPI}/namespaces/{ns}/machines", json=machine()), 201)
    bad = condition("AgentReady", status="Maybe", message="x" * 32769)
    del bad["reason"]
    reply = admin.check(admin.patch(path, {"status": {"conditions": [bad]}}), 422)
    causes = {c["field"]: c for c in reply["details"]["causes"]}
    assert causes["status.conditions[0].status"]["reason"] == "FieldValueNotSupported"
    assert causes["status.conditions[0].status"]["message"] == (
        'Unsupported value: "Maybe": supported values: "True", "False", "Unknown"')
    assert causes["status.conditions[0].message"]["reason"] == "FieldValueTooLong"
    assert causes["status.conditions[0].reason"]["reason"] == "FieldValueRequired"
    too_many = [condition(f"C{i}") for i in range(33)]
    reply = admin.check(admin.patch(path, {"status": {"conditions": too_many}}), 422)
    assert reply["details"]["causes"][0]["reason"] == "FieldValueTooMany"
    dup = [condition("Ready"), condition("Ready", "False")]
    reply = admin.check(admin.patch(path, {"status": {"conditions": dup}}), 422)
    assert reply["details"]["causes"][0]["reason"] == "FieldValueDuplicate"


def test_unknown_fields_are_pruned_with_a_warning(admin: Kube, ns: str) -> None:
    body = machine()
    body["spec"]["foo"] = "bar"
    resp = admin.post(f"{CAPI}/namespaces/{ns}/machines", json=body)
    created = admin.check(resp, 201)
    assert "foo" not in created["spec"]
    assert 'unknown field \\"spec.foo\\"' in resp.headers.get("Warning", "")


def test_strict_field_validation_rejects_unknown_fields_with_400(admin: Kube, ns: str) -> None:
    body = machine()
    body["spec"]["foo"] = "bar"
    reply = admin.check(admin.post(f"{CAPI}/namespaces/{ns}/machines", json=body,
                                   params={"fieldValidation": "Strict"}), 400)
    assert reply["reason"] == "BadRequest"
    assert reply["message"] == ('Machine in version "v1beta2" cannot be handled as a Machine: '
                                'strict decoding error: unknown field "spec.foo"')


def test_an_invalid_name_is_422(admin: Kube, ns: str) -> None:
    reply = admin.check(admin.post(f"{CAPI}/namespaces/{ns}/machines",
                                   json=machine("Worker_0")), 422)
    assert reply["details"]["causes"][0]["field"] == "metadata.name"


def test_other_served_versions_read_the_same_stored_object(admin: Kube, ns: str) -> None:
    admin.check(admin.post(f"{IPAM}/namespaces/{ns}/ipaddressclaims", json=claim("c-1")), 201)
    old = admin.check(admin.get(
        f"/apis/ipam.cluster.x-k8s.io/v1alpha1/namespaces/{ns}/ipaddressclaims/c-1"), 200)
    assert old["apiVersion"] == "ipam.cluster.x-k8s.io/v1alpha1"
    assert old["spec"]["poolRef"]["name"] == "pool"
