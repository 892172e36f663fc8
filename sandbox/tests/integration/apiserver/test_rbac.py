"""RBAC: 403 bodies in the real wording, roles with subresources and names, and
SelfSubjectAccessReview."""

from __future__ import annotations

import yaml
from machine_agent_sandbox.apiserver import ApiServer

from agent.config.fields import Decoder
from agent.config.network import NetworkSpec
from agent.kube.claims import claim_key, claim_name
from agent.kube.rbac import NodeIdentity, capi_claims, render_node_rbac
from sandbox.tests.integration.apiserver.kubeclient import CAPI, Kube, claim, condition, machine

RBAC = "/apis/rbac.authorization.k8s.io/v1"


def _grant(admin: Kube, ns: str, user: str, rules: list[dict[str, list[str]]]) -> None:
    admin.check(admin.post(f"{RBAC}/namespaces/{ns}/roles", json={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "agent"}, "rules": rules}), 201)
    admin.check(admin.post(f"{RBAC}/namespaces/{ns}/rolebindings", json={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "agent"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "agent"},
        "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": ns}]}), 201)


def test_a_missing_permission_is_403_in_the_real_wording(
        admin: Kube, ns: str, service_account: tuple[str, Kube]) -> None:
    user, agent = service_account
    admin.check(admin.post(f"{CAPI}/namespaces/{ns}/machines", json=machine()), 201)
    reply = agent.check(agent.get(f"{CAPI}/namespaces/{ns}/machines/worker-0"), 403)
    assert reply["reason"] == "Forbidden"
    assert reply["message"] == (
        f'machines.cluster.x-k8s.io "worker-0" is forbidden: User "{user}" cannot get '
        f'resource "machines" in API group "cluster.x-k8s.io" in the namespace "{ns}"')
    assert reply["details"] == {"name": "worker-0", "group": "cluster.x-k8s.io",
                                "kind": "machines"}
    listing = agent.check(agent.get(f"{CAPI}/namespaces/{ns}/machines"), 403)
    assert listing["message"].startswith("machines.cluster.x-k8s.io is forbidden: ")


def test_roles_grant_verbs_on_subresources_and_named_objects(
        admin: Kube, ns: str, service_account: tuple[str, Kube]) -> None:
    user, agent = service_account
    for name in ("worker-0", "worker-1"):
        admin.check(admin.post(f"{CAPI}/namespaces/{ns}/machines", json=machine(name)), 201)
    _grant(admin, ns, user, [
        {"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines"], "verbs": ["get"],
         "resourceNames": ["worker-0"]},
        {"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines/status"],
         "verbs": ["patch"]}])
    agent.check(agent.get(f"{CAPI}/namespaces/{ns}/machines/worker-0"), 200)
    agent.check(agent.get(f"{CAPI}/namespaces/{ns}/machines/worker-1"), 403)
    agent.check(agent.patch(f"{CAPI}/namespaces/{ns}/machines/worker-0/status",
                            {"status": {"phase": "Running"}}), 200)
    denied = agent.check(agent.patch(f"{CAPI}/namespaces/{ns}/machines/worker-0",
                                     {"metadata": {"labels": {"a": "b"}}}), 403)
    assert 'cannot patch resource "machines" in API group' in denied["message"]


def test_self_subject_access_review_answers_by_the_same_rules(
        admin: Kube, ns: str, service_account: tuple[str, Kube]) -> None:
    user, agent = service_account
    _grant(admin, ns, user, [{"apiGroups": ["cluster.x-k8s.io"],
                              "resources": ["machines/status"], "verbs": ["patch"]}])

    def allowed(verb: str, subresource: str = "") -> bool:
        review = agent.check(agent.post(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json={
                "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {
                    "namespace": ns, "verb": verb, "group": "cluster.x-k8s.io",
                    "resource": "machines", "subresource": subresource}}}), 201)
        return bool(review["status"]["allowed"])

    assert allowed("patch", "status")
    assert not allowed("patch")
    assert not allowed("delete", "status")


def test_cluster_role_bindings_grant_across_namespaces(
        admin: Kube, ns: str, service_account: tuple[str, Kube]) -> None:
    user, agent = service_account
    name = f"{ns}-reader"
    admin.check(admin.post(f"{RBAC}/clusterroles", json={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}), 201)
    admin.check(admin.post(f"{RBAC}/clusterrolebindings", json={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": name},
        "subjects": [{"kind": "User", "name": user}]}), 201)
    try:
        agent.check(agent.get("/api/v1/nodes"), 200)
        reply = agent.check(agent.get("/api/v1/nodes/n1"), 403)
        assert reply["message"].endswith('in API group "" at the cluster scope')
    finally:
        admin.delete(f"{RBAC}/clusterrolebindings/{name}")
        admin.delete(f"{RBAC}/clusterroles/{name}")


def test_kubelets_register_their_node_and_change_only_its_own(
        admin: Kube, own_standin: ApiServer) -> None:
    """What the Node authorizer and NodeRestriction allow a kubelet on Nodes."""
    kubelet = admin.with_token(own_standin.make_token("system:node:worker-0",
                                                       ["system:nodes"]))
    for name in ("worker-0", "worker-1"):
        kubelet.check(kubelet.post("/api/v1/nodes", json={
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}), 201)
    ready = {"status": {"conditions": [condition("Ready", reason="KubeletReady")]}}
    kubelet.check(kubelet.patch("/api/v1/nodes/worker-0/status", ready), 200)
    kubelet.check(kubelet.get("/api/v1/nodes/worker-1"), 200)
    denied = kubelet.check(kubelet.patch("/api/v1/nodes/worker-1/status", ready), 403)
    assert denied["message"] == (
        'nodes "worker-1" is forbidden: User "system:node:worker-0" cannot patch resource '
        '"nodes/status" in API group "" at the cluster scope')
    kubelet.check(kubelet.delete("/api/v1/nodes/worker-1"), 403)
    kubelet.check(kubelet.get("/api/v1/namespaces/default/secrets"), 403)
    # the same groups without a node's name are no kubelet
    stranger = admin.with_token(own_standin.make_token("someone", ["system:nodes"]))
    stranger.check(stranger.get("/api/v1/nodes/worker-0"), 403)


def test_the_node_rbac_grants_get_on_the_cni_manifest_configmap_by_name_only(
        admin: Kube, ns: str, service_account: tuple[str, Kube]) -> None:
    _user, agent = service_account
    for name in ("cni-manifest", "someone-elses"):
        admin.check(admin.post(f"/api/v1/namespaces/{ns}/configmaps", json={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"manifest.yaml": "kind: List\n"}}), 201)
    rbac = render_node_rbac(NodeIdentity(ns, "cp-0", "c1", "cp-0-bootstrap", "agent",
                                         cni_manifest_configmap="cni-manifest"))
    for doc in yaml.safe_load_all(rbac):
        plural = "roles" if doc["kind"] == "Role" else "rolebindings"
        admin.check(admin.post(f"{RBAC}/namespaces/{ns}/{plural}", json=doc), 201)
    configmaps = f"/api/v1/namespaces/{ns}/configmaps"
    assert agent.check(agent.get(f"{configmaps}/cni-manifest"), 200)["data"] == {
        "manifest.yaml": "kind: List\n"}
    agent.check(agent.get(f"{configmaps}/someone-elses"), 403)
    agent.check(agent.get(configmaps), 403)  # no list: the name is all it may read
    agent.check(agent.get(configmaps, params={"watch": "true"}), 403)
    denied = agent.check(agent.put(f"{configmaps}/cni-manifest", json={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cni-manifest"},
        "data": {}}), 403)
    assert 'cannot update resource "configmaps"' in denied["message"]
    # without a configMapRef, the rendered RBAC grants no ConfigMap at all
    assert "configmaps" not in render_node_rbac(NodeIdentity(
        ns, "cp-0", "c1", "cp-0-bootstrap", "agent"))


def test_a_node_reaches_only_its_own_ipaddressclaims(
        admin: Kube, ns: str, service_account: tuple[str, Kube]) -> None:
    """A stolen node credential must not free another node's address (deleting its claim
    hands the address out again): the rendered Role names this node's claims."""
    _user, agent = service_account
    ours = claim_name("worker-a", "eth0", "ipv4", claim_key("uid-a", "eth0", "ipv4"))
    theirs = claim_name("worker-b", "eth0", "ipv4", claim_key("uid-b", "eth0", "ipv4"))
    network = Decoder().decode_object(NetworkSpec, {"interfaces": [{"name": "eth0", "addresses": [
        {"ipam": {"plugin": "capi", "pool": "workers"}},
        {"ipam": {"plugin": "netbox", "pool": "2001:db8::/64", "family": "ipv6"}}]}]}, "")
    assert capi_claims(network) == (("eth0", "ipv4"),)  # the capi plugin's claims only
    rbac = render_node_rbac(NodeIdentity(ns, "worker-a", "c1", "worker-a-bootstrap", "agent",
                                         machine_uid="uid-a",
                                         ipam_claims=capi_claims(network)))
    for doc in yaml.safe_load_all(rbac):
        plural = "roles" if doc["kind"] == "Role" else "rolebindings"
        admin.check(admin.post(f"{RBAC}/namespaces/{ns}/{plural}", json=doc), 201)
    claims = f"/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/{ns}/ipaddressclaims"
    admin.check(admin.post(claims, json=claim(theirs)), 201)
    # what the capi plugin does with its own claim: create, get, watch by name, delete
    agent.check(agent.post(claims, json=claim(ours)), 201)
    agent.check(agent.get(f"{claims}/{ours}"), 200)
    listed = agent.check(agent.get(claims, params={"fieldSelector": f"metadata.name={ours}"}),
                         200)
    assert [c["metadata"]["name"] for c in listed["items"]] == [ours]
    agent.check(agent.delete(f"{claims}/{ours}"), 200)
    # nothing of the other node's, and no namespace-wide list or watch
    agent.check(agent.get(claims), 403)
    agent.check(agent.get(claims, params={"watch": "true"}), 403)
    agent.check(agent.get(claims, params={"fieldSelector": f"metadata.name={theirs}"}), 403)
    agent.check(agent.get(f"{claims}/{theirs}"), 403)
    denied = agent.check(agent.delete(f"{claims}/{theirs}"), 403)
    assert 'cannot delete resource "ipaddressclaims"' in denied["message"]
    admin.check(admin.get(f"{claims}/{theirs}"), 200)
    # rendered without capi claims, the Role grants nothing on IPAM
    assert "ipam.cluster.x-k8s.io" not in render_node_rbac(NodeIdentity(
        ns, "worker-a", "c1", "worker-a-bootstrap", "agent"))
