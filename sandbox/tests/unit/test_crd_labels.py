"""The sandbox's CRDs are the released ones: with the labels kustomize adds to the
released manifests. Without the contract labels the real Machine controller refuses a
Machine whose bootstrap configRef is a KubeadmConfig ("cannot find any versions matching
contract versions [v1beta2 v1beta1] for CRD kubeadmconfigs.bootstrap.cluster.x-k8s.io as
contract version label(s) are either missing or empty")."""

from __future__ import annotations

from machine_agent_sandbox.apiserver.resources import bundled_crds

# kubernetes-sigs/cluster-api ae7ff047: core/config/default/kustomization.yaml,
# bootstrap/kubeadm/config/default/kustomization.yaml and crd/kustomization.yaml
RELEASED = {
    "kubeadmconfigs.bootstrap.cluster.x-k8s.io": {
        "cluster.x-k8s.io/provider": "bootstrap-kubeadm",
        "cluster.x-k8s.io/v1beta1": "v1beta1", "cluster.x-k8s.io/v1beta2": "v1beta2"},
    "clusters.cluster.x-k8s.io": {"cluster.x-k8s.io/provider": "cluster-api"},
    "machines.cluster.x-k8s.io": {"cluster.x-k8s.io/provider": "cluster-api"},
    "ipaddressclaims.ipam.cluster.x-k8s.io": {"cluster.x-k8s.io/provider": "cluster-api"},
    "ipaddresses.ipam.cluster.x-k8s.io": {"cluster.x-k8s.io/provider": "cluster-api"},
}


def test_the_bundled_crds_carry_the_released_manifests_labels() -> None:
    labels = {crd["metadata"]["name"]: crd["metadata"].get("labels") or {}
              for crd in bundled_crds()}
    assert {name: labels.get(name) for name in RELEASED} == RELEASED


def test_a_bootstrap_crd_names_every_version_it_serves_as_a_contract() -> None:
    """What the Machine controller reads: the contract label's value is a served version."""
    for crd in bundled_crds():
        contract = {v for k, v in (crd["metadata"].get("labels") or {}).items()
                    if k.startswith("cluster.x-k8s.io/v1")}
        served = {v["name"] for v in crd["spec"]["versions"] if v.get("served")}
        assert contract <= served, crd["metadata"]["name"]
