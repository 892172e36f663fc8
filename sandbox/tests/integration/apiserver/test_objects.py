"""Objects and their metadata: create, read, update, delete, as the real server answers."""

from __future__ import annotations

from typing import Any

from sandbox.tests.integration.apiserver.kubeclient import (
    CAPI,
    Kube,
    condition,
    machine,
    wait_until,
)

Obj = dict[str, Any]


def machines(ns: str, name: str = "") -> str:
    return f"{CAPI}/namespaces/{ns}/machines" + (f"/{name}" if name else "")


def test_unknown_token_is_answered_401_with_a_status_body(admin: Kube, ns: str) -> None:
    body = admin.with_token("not-a-token").check(
        admin.with_token("not-a-token").get(machines(ns)), 401)
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def test_discovery_lists_the_groups_and_the_served_resources(admin: Kube) -> None:
    groups = admin.check(admin.get("/apis"), 200)
    names = {g["name"]: g for g in groups["groups"]}
    assert {"cluster.x-k8s.io", "ipam.cluster.x-k8s.io"} <= set(names)
    assert {v["version"] for v in names["cluster.x-k8s.io"]["versions"]} >= {"v1beta1",
                                                                             "v1beta2"}
    resources = admin.check(admin.get(CAPI), 200)["resources"]
    assert {"machines", "machines/status"} <= {r["name"] for r in resources}
    assert "v1" in admin.check(admin.get("/api"), 200)["versions"]


def test_root_lists_the_served_paths_as_cluster_api_reads_them(admin: Kube) -> None:
    # Cluster API's ClusterCache reads GET / to tell that a workload cluster is up.
    paths = admin.check(admin.get("/"), 200)["paths"]
    assert {"/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz",
            "/version"} <= set(paths)
    assert paths == sorted(paths)


def test_create_fills_metadata_and_a_second_create_is_409_already_exists(
        admin: Kube, ns: str) -> None:
    created = admin.check(admin.post(machines(ns), json=machine()), 201)
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["generation"] == 1 and int(meta["resourceVersion"]) > 0
    assert meta["managedFields"][0]["operation"] == "Update"
    again = admin.check(admin.post(machines(ns), json=machine()), 409)
    assert again["reason"] == "AlreadyExists"
    assert again["message"] == 'machines.cluster.x-k8s.io "worker-0" already exists'
    assert again["details"] == {"name": "worker-0", "group": "cluster.x-k8s.io",
                                "kind": "machines"}


def test_get_of_a_missing_object_is_404_not_found(admin: Kube, ns: str) -> None:
    body = admin.check(admin.get(machines(ns, "ghost")), 404)
    assert body["reason"] == "NotFound"
    assert body["message"] == 'machines.cluster.x-k8s.io "ghost" not found'


def test_resource_versions_increase_and_generation_follows_spec_only(
        admin: Kube, ns: str) -> None:
    m = admin.check(admin.post(machines(ns), json=machine()), 201)
    rv1 = int(m["metadata"]["resourceVersion"])
    m["spec"]["providerID"] = "docker:////worker-0"
    m = admin.check(admin.put(machines(ns, "worker-0"), json=m), 200)
    assert int(m["metadata"]["resourceVersion"]) > rv1
    assert m["metadata"]["generation"] == 2
    m["status"] = {"phase": "Running"}
    m = admin.check(admin.put(machines(ns, "worker-0") + "/status", json=m), 200)
    assert m["status"] == {"phase": "Running"}
    assert m["metadata"]["generation"] == 2


def test_status_written_through_the_main_resource_is_silently_dropped(
        admin: Kube, ns: str) -> None:
    body = machine()
    body["status"] = {"phase": "Running"}
    created = admin.check(admin.post(machines(ns), json=body), 201)
    assert "status" not in created
    created["status"] = {"phase": "Running"}
    updated = admin.check(admin.put(machines(ns, "worker-0"), json=created), 200)
    assert "status" not in updated
    patched = admin.check(admin.patch(machines(ns, "worker-0"), {
        "status": {"conditions": [condition("Ready")]}}), 200)
    assert "status" not in patched


def test_the_status_subresource_changes_only_status(admin: Kube, ns: str) -> None:
    admin.check(admin.post(machines(ns), json=machine()), 201)
    patched = admin.check(admin.patch(machines(ns, "worker-0") + "/status", {
        "spec": {"providerID": "sneaky"}, "metadata": {"labels": {"x": "y"}},
        "status": {"phase": "Provisioning"}}), 200)
    assert patched["status"] == {"phase": "Provisioning"}
    assert "providerID" not in patched["spec"]
    assert "labels" not in patched["metadata"]


def test_update_with_a_stale_resource_version_is_409_with_the_exact_message(
        admin: Kube, ns: str) -> None:
    m = admin.check(admin.post(machines(ns), json=machine()), 201)
    stale = dict(m)
    admin.check(admin.patch(machines(ns, "worker-0"), {"metadata": {"labels": {"a": "b"}}}),
                200)
    body = admin.check(admin.put(machines(ns, "worker-0"), json=stale), 409)
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on machines.cluster.x-k8s.io "worker-0": the object '
        "has been modified; please apply your changes to the latest version and try again")
    assert body["details"] == {"name": "worker-0", "group": "cluster.x-k8s.io",
                               "kind": "machines"}


def test_a_non_numeric_resource_version_is_a_500(admin: Kube, ns: str) -> None:
    m = admin.check(admin.post(machines(ns), json=machine()), 201)
    m["metadata"]["resourceVersion"] = "yesterday"
    assert admin.put(machines(ns, "worker-0"), json=m).status_code == 500


def test_update_of_a_custom_resource_needs_a_resource_version(admin: Kube, ns: str) -> None:
    admin.check(admin.post(machines(ns), json=machine()), 201)
    body = admin.check(admin.put(machines(ns, "worker-0"), json=machine()), 422)
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "metadata.resourceVersion"


def test_list_filters_by_label_and_field_selectors(admin: Kube, ns: str) -> None:
    for name, labels in (("a", {"role": "worker", "zone": "1"}), ("b", {"role": "worker"}),
                         ("c", {"role": "cp"})):
        body = machine(name)
        body["metadata"]["labels"] = labels
        admin.check(admin.post(machines(ns), json=body), 201)

    def names(**params: str) -> list[str]:
        listed = admin.check(admin.get(machines(ns), params=params), 200)
        assert listed["kind"] == "MachineList" and listed["metadata"]["resourceVersion"]
        return sorted(i["metadata"]["name"] for i in listed["items"])

    assert names() == ["a", "b", "c"]
    assert names(labelSelector="role=worker,zone") == ["a"]
    assert names(labelSelector="role!=worker") == ["c"]
    assert names(labelSelector="role in (cp,other)") == ["c"]
    assert names(fieldSelector="metadata.name=b") == ["b"]


def test_delete_without_finalizers_answers_a_success_status(admin: Kube, ns: str) -> None:
    uid = admin.check(admin.post(machines(ns), json=machine()), 201)["metadata"]["uid"]
    body = admin.check(admin.delete(machines(ns, "worker-0")), 200)
    assert body["kind"] == "Status" and body["status"] == "Success"
    assert body["details"] == {"name": "worker-0", "group": "cluster.x-k8s.io",
                               "kind": "machines", "uid": uid}
    admin.check(admin.get(machines(ns, "worker-0")), 404)


def test_finalizers_hold_deletion_until_the_last_one_is_removed(admin: Kube, ns: str) -> None:
    body = machine()
    body["metadata"]["finalizers"] = ["example.com/a", "example.com/b"]
    admin.check(admin.post(machines(ns), json=body), 201)
    held = admin.check(admin.delete(machines(ns, "worker-0")), 200)
    assert held["kind"] == "Machine" and held["metadata"]["deletionTimestamp"]
    again = admin.check(admin.patch(machines(ns, "worker-0"), {
        "metadata": {"finalizers": ["example.com/a", "example.com/b", "example.com/c"]}}), 422)
    assert "no new finalizers can be added" in again["message"]
    admin.check(admin.patch(machines(ns, "worker-0"),
                            {"metadata": {"finalizers": ["example.com/b"]}}), 200)
    admin.check(admin.get(machines(ns, "worker-0")), 200)
    admin.check(admin.patch(machines(ns, "worker-0"), {"metadata": {"finalizers": None}}), 200)
    admin.check(admin.get(machines(ns, "worker-0")), 404)


def test_deleting_an_owner_garbage_collects_its_dependents(admin: Kube, ns: str) -> None:
    owner = admin.check(admin.post(f"/api/v1/namespaces/{ns}/configmaps", json={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}), 201)
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
           "uid": owner["metadata"]["uid"]}
    for name in ("dep-1", "dep-2"):
        admin.check(admin.post(f"/api/v1/namespaces/{ns}/secrets", json={
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "ownerReferences": [ref]}}), 201)
    admin.check(admin.delete(f"/api/v1/namespaces/{ns}/configmaps/owner"), 200)
    # asynchronous, as the controller manager's garbage collector is: awaited, bounded
    wait_until(lambda: all(
        admin.get(f"/api/v1/namespaces/{ns}/secrets/{n}").status_code == 404
        for n in ("dep-1", "dep-2")), timeout=60, every=0.2)


def test_the_collector_keeps_what_another_owner_holds_and_what_an_update_released(
        admin: Kube, ns: str) -> None:
    """A dependent with another existing owner only loses the gone owner's reference; one
    whose reference an update removed is no dependent any more (the collector's index
    follows every write)."""
    cms, secrets = f"/api/v1/namespaces/{ns}/configmaps", f"/api/v1/namespaces/{ns}/secrets"
    refs = {}
    for name in ("owner", "other"):
        made = admin.check(admin.post(cms, json={"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"name": name}}), 201)
        refs[name] = {"apiVersion": "v1", "kind": "ConfigMap", "name": name,
                      "uid": made["metadata"]["uid"]}
    admin.check(admin.post(secrets, json={
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "shared", "ownerReferences": [refs["owner"], refs["other"]]}}),
        201)
    admin.check(admin.post(secrets, json={
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "released", "ownerReferences": [refs["owner"]]}}), 201)
    admin.check(admin.patch(f"{secrets}/released",
                            {"metadata": {"ownerReferences": None}}), 200)
    admin.check(admin.delete(f"{cms}/owner"), 200)
    # one pass of the collector handles every dependent of the gone owner: once `shared`
    # has lost its reference, `released` would be gone too if it were still one
    wait_until(lambda: admin.check(admin.get(f"{secrets}/shared"), 200)["metadata"].get(
        "ownerReferences") == [refs["other"]], timeout=60, every=0.2)
    assert "ownerReferences" not in admin.check(admin.get(f"{secrets}/released"),
                                                200)["metadata"]


def test_a_foreground_deletion_removes_the_dependents_first(admin: Kube, ns: str) -> None:
    """The owner stays, terminating with the `foregroundDeletion` finalizer, until the
    garbage collector has deleted its dependents; then it goes too."""
    owner = admin.check(admin.post(f"/api/v1/namespaces/{ns}/configmaps", json={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}), 201)
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
           "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}
    admin.check(admin.post(f"/api/v1/namespaces/{ns}/secrets", json={
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "dep", "ownerReferences": [ref]}}), 201)
    deleting = admin.check(admin.delete(f"/api/v1/namespaces/{ns}/configmaps/owner",
                                        params={"propagationPolicy": "Foreground"}), 200)
    assert deleting["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert deleting["metadata"]["deletionTimestamp"]
    wait_until(lambda: admin.get(f"/api/v1/namespaces/{ns}/configmaps/owner").status_code
               == 404, timeout=60, every=0.2)
    assert admin.get(f"/api/v1/namespaces/{ns}/secrets/dep").status_code == 404


def test_secrets_take_string_data_and_core_kinds_keep_unknown_fields(
        admin: Kube, ns: str) -> None:
    secret = admin.check(admin.post(f"/api/v1/namespaces/{ns}/secrets", json={
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "boot"},
        "stringData": {"value": "#cloud-config", "format": "cloud-config"}}), 201)
    assert secret["data"] == {"value": "I2Nsb3VkLWNvbmZpZw==", "format": "Y2xvdWQtY29uZmln"}
    assert "stringData" not in secret
    ds = admin.check(admin.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets", json={
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "cni"},
        "spec": {"selector": {"matchLabels": {"app": "cni"}}, "template": {
            "metadata": {"labels": {"app": "cni"}},
            "spec": {"containers": [{"name": "cni", "image": "cni:1"}]}}}}), 201)
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "cni:1"
