"""What the extension answers Cluster API's CanUpdate hooks, on the requests Cluster API
v1.14's own controllers sent (tests/fixtures/real-capi/in-place-updates.json): Cluster
API applies the patches to the current objects, and what is still different from the
desired ones is rolled out by replacement."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

from agent.inplace.decide import can_update_machine, can_update_machine_set
from agent.inplace.hooks import discovery, path_of

RECORDED = json.loads((Path(__file__).parents[2] / "fixtures/real-capi/in-place-updates.json")
                      .read_text())["scenarios"]


def recorded_request(scenario: str, hook: str) -> dict[str, Any]:
    call = next(c for c in RECORDED[scenario]["hook_calls"] if c["path"].endswith(hook))
    return copy.deepcopy(call["request"])


def apply(obj: Any, patch: dict[str, Any] | None) -> Any:
    """What Cluster API does with a JSONPatch (add, replace, remove on object members)."""
    obj = copy.deepcopy(obj)
    if not patch:
        return obj
    assert patch["patchType"] == "JSONPatch"
    for op in json.loads(base64.b64decode(patch["patch"])):
        *parents, last = op["path"].strip("/").split("/")
        node = obj
        for key in parents:
            node = node[key]
        if op["op"] == "remove":
            del node[last]
        else:
            node[last] = op["value"]
    return obj


def in_place(request: dict[str, Any], response: dict[str, Any]) -> bool:
    """Cluster API's verdict: the patched current specs equal the desired ones."""
    cur, want = request["current"], request["desired"]
    return all(apply(cur[k], response.get(patch))["spec"]["template"]["spec"] ==
               want[k]["spec"]["template"]["spec"] for k, patch in (
                   ("machineSet", "machineSetPatch"),
                   ("bootstrapConfigTemplate", "bootstrapConfigTemplatePatch"),
                   ("infrastructureMachineTemplate", "infrastructureMachineTemplatePatch")))


def test_discovery_names_the_three_hooks_at_cluster_apis_paths() -> None:
    handlers = {h["requestHook"]["hook"]: h["name"] for h in discovery()["handlers"]}
    assert handlers == {"CanUpdateMachine": "can-update-machine",
                        "CanUpdateMachineSet": "can-update-machineset",
                        "UpdateMachine": "update-machine"}
    recorded_paths = {c["path"] for c in RECORDED["in-place"]["hook_calls"]}
    assert path_of("CanUpdateMachineSet") in recorded_paths
    assert path_of("UpdateMachine") in recorded_paths


def test_the_recorded_rollout_changes_kubelet_labels_so_it_is_not_in_place() -> None:
    """The file's new content is patched (in place), the node-labels are not: the kubelet
    reads them only when it registers, so Cluster API rolls the Machine out."""
    request = recorded_request("in-place", "can-update-machineset")
    response = can_update_machine_set(request)
    assert response["status"] == "Success"
    assert not in_place(request, response)
    patched = apply(request["current"]["bootstrapConfigTemplate"],
                    response.get("bootstrapConfigTemplatePatch"))["spec"]["template"]["spec"]
    want = request["desired"]["bootstrapConfigTemplate"]["spec"]["template"]["spec"]
    assert patched["files"] == want["files"]
    assert patched["joinConfiguration"] != want["joinConfiguration"]


def _files_request(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> dict[str, Any]:
    request = recorded_request("in-place", "can-update-machineset")
    cur = request["current"]["bootstrapConfigTemplate"]["spec"]["template"]["spec"]
    want = request["desired"]["bootstrapConfigTemplate"]["spec"]["template"]["spec"]
    want.update(copy.deepcopy(cur))
    cur["files"], want["files"] = old, new
    return request


def test_a_file_added_or_changed_with_inline_content_is_made_in_place() -> None:
    one = {"path": "/etc/a.conf", "content": "1\n", "permissions": "0644"}
    request = _files_request([one], [{**one, "content": "2\n"},
                                     {"path": "/etc/b.conf", "content": "b\n",
                                      "owner": "root:root", "permissions": "0600"}])
    assert in_place(request, can_update_machine_set(request))


def test_files_the_node_cannot_keep_in_place_are_rolled_out() -> None:
    one = {"path": "/etc/a.conf", "content": "1\n"}
    for new in (
            [],  # removed
            [one, {"path": "/etc/s.conf", "contentFrom": {"secret": {"name": "s",
                                                                      "key": "k"}}}],
            [{**one, "encoding": "base64", "content": "MQo="}],
            [{**one, "append": True}],
            [{**one, "content": "2\n", "permissions": "u+x"}],
            [{**one, "content": "2\n", "path": "etc/relative"}],
            [one, {**one, "content": "2\n"}]):  # a path twice
        request = _files_request([one], new)
        assert not in_place(request, can_update_machine_set(request)), new


def test_an_ntp_change_is_made_in_place() -> None:
    request = recorded_request("in-place", "can-update-machineset")
    cur = request["current"]["bootstrapConfigTemplate"]["spec"]["template"]["spec"]
    want = request["desired"]["bootstrapConfigTemplate"]["spec"]["template"]["spec"]
    want["files"], want["joinConfiguration"] = cur["files"], cur["joinConfiguration"]
    want["ntp"] = {"enabled": True, "servers": ["198.51.100.123", "203.0.113.123"]}
    response = can_update_machine_set(request)
    assert in_place(request, response)
    assert can_update_machine_set(request) == response  # deterministic


def _with_version(version: str) -> dict[str, Any]:
    """The recorded CanUpdateMachineSet request (v1.35.0) with only the MachineSet's
    Kubernetes version changed."""
    request = recorded_request("in-place", "can-update-machineset")
    request["desired"]["machineSet"]["spec"]["template"]["spec"]["version"] = version
    want = request["desired"]["bootstrapConfigTemplate"]["spec"]["template"]["spec"]
    want.update({k: v for k, v in request["current"]["bootstrapConfigTemplate"]["spec"]
                 ["template"]["spec"].items()})
    return request


def test_a_newer_patch_release_is_made_in_place_another_minor_one_rolled_out() -> None:
    request = _with_version("v1.35.1")
    response = can_update_machine_set(request)
    assert in_place(request, response)
    ops = json.loads(base64.b64decode(response["machineSetPatch"]["patch"]))
    assert {"op": "replace", "path": "/spec/template/spec/version", "value": "v1.35.1"} in ops
    for version in ("v1.36.0", "v1.34.9", "v2.35.1", "1.35.1", "v1.35.1-rc.0"):
        assert not in_place(_with_version(version),
                            can_update_machine_set(_with_version(version))), version


def test_a_control_plane_machines_version_is_left_to_its_rollout() -> None:
    """CanUpdateMachine (KubeadmControlPlane's hook, and a worker Machine's): a worker's
    patch release is patched; a control plane's upgrade (its static Pods, etcd) is
    kubeadm's on the control plane and a rollout here."""
    machine = recorded_request("in-place", "update-machine")["desired"]["machine"]
    machine["spec"]["version"] = "v1.35.0"
    desired = copy.deepcopy(machine)
    desired["spec"]["version"] = "v1.35.1"
    request = {"current": {"machine": machine}, "desired": {"machine": desired}}
    ops = json.loads(base64.b64decode(can_update_machine(request)["machinePatch"]["patch"]))
    assert ops == [{"op": "replace", "path": "/spec/version", "value": "v1.35.1"}]
    machine["metadata"]["labels"]["cluster.x-k8s.io/control-plane"] = ""
    assert "machinePatch" not in can_update_machine(request)


def test_turning_ntp_off_is_not_done_in_place() -> None:
    request = recorded_request("in-place", "can-update-machineset")
    want = request["desired"]["bootstrapConfigTemplate"]["spec"]["template"]["spec"]
    want.update(copy.deepcopy(request["current"]["bootstrapConfigTemplate"]["spec"]
                              ["template"]["spec"]))
    want["ntp"] = {"enabled": False}
    assert not in_place(request, can_update_machine_set(request))


def test_a_control_plane_machines_ntp_change_is_patched_on_its_kubeadm_config() -> None:
    config = {"ntp": {"servers": ["203.0.113.123"]}, "files": [{"path": "/a"}]}
    desired = {"ntp": {"servers": ["198.51.100.123"]}, "files": [{"path": "/a"}]}
    response = can_update_machine({"current": {"bootstrapConfig": {"spec": config}},
                                   "desired": {"bootstrapConfig": {"spec": desired}}})
    assert apply({"spec": config}, response["bootstrapConfigPatch"]) == {"spec": desired}


def _kubelet_request(old: list[dict[str, str]], new: list[dict[str, str]]) -> dict[str, Any]:
    """The recorded MachineSet request with only the kubelet's extra flags changed."""
    request = recorded_request("in-place", "can-update-machineset")
    cur = request["current"]["bootstrapConfigTemplate"]["spec"]["template"]["spec"]
    want = request["desired"]["bootstrapConfigTemplate"]["spec"]["template"]["spec"]
    want.update(copy.deepcopy(cur))
    cur["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"] = old
    want["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"] = new
    return request


def test_a_kubelet_flag_added_or_changed_is_made_in_place() -> None:
    labels = {"name": "node-labels", "value": "tier=workers-v1"}
    request = _kubelet_request([labels, {"name": "max-pods", "value": "110"}],
                               [labels, {"name": "max-pods", "value": "200"},
                                {"name": "eviction-hard", "value": "memory.available<5%"}])
    assert in_place(request, can_update_machine_set(request))


def test_kubelet_flags_the_node_cannot_change_in_place_are_rolled_out() -> None:
    labels = {"name": "node-labels", "value": "tier=workers-v1"}
    for old, new in (
            ([labels], [{"name": "node-labels", "value": "tier=workers-v2"}]),  # at registration
            ([labels, {"name": "max-pods", "value": "110"}], [labels]),  # a flag removed
            ([labels], [labels, {"name": "register-with-taints", "value": "a=b:NoSchedule"}]),
            ([labels], [labels, {"name": "max-pods", "value": "1 --kubeconfig=/x"}]),  # 2 flags
            ([labels], [labels, {"name": "max-pods", "value": "1"},
                        {"name": "max-pods", "value": "2"}])):  # given twice
        request = _kubelet_request(old, new)
        assert not in_place(request, can_update_machine_set(request)), new
