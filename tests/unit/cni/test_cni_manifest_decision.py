"""Which node applies the CNI manifest (the first control-plane node, as the config or the
Machine says), where it comes from (file, URL, or a ConfigMap on the management cluster),
and how the configuration refuses an ambiguous source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.config import load_config
from agent.config.cni import ManifestSpec
from agent.config.sources import FileSource
from agent.errors import ConfigError
from agent.host import Host
from agent.kube.facts import MachineFacts
from agent.kube.machine import control_plane_initialized
from agent.phases.cni.manifest import decide


def load(tmp_path: Path, manifest: dict[str, Any]) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "machine-agent.io/v1alpha1",
                                    "kind": "AgentConfig",
                                    "spec": {"cni": {"manifest": manifest}}}))
    return load_config(Host(tmp_path), [FileSource(str(path), required=True,
                                                   outside_root=True)])


def errors(tmp_path: Path, manifest: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, manifest)
    return {e.path: e.message for e in info.value.errors}


def test_a_configmap_ref_is_a_manifest_source_with_a_default_key(tmp_path: Path) -> None:
    spec = load(tmp_path, {"configMapRef": {"name": "cni-manifest"}}).config.spec.cni.manifest
    assert spec.config_map_ref.name == "cni-manifest"
    assert spec.config_map_ref.key == "manifest.yaml"
    assert spec.apply == "auto"


@pytest.mark.parametrize(("manifest", "expected"), [
    ({"file": "/srv/cni.yaml", "configMapRef": {"name": "cni"}},
     {"spec.cni.manifest": "give exactly one of file, url or configMapRef "
                           "(got file and configMapRef)"}),
    ({"url": "https://example.org/cni.yaml", "sha256": "a" * 64,
      "configMapRef": {"name": "cni"}},
     {"spec.cni.manifest": "give exactly one of file, url or configMapRef "
                           "(got url and configMapRef)"}),
    ({"kubeconfig": "/etc/kubernetes/admin.conf"},
     {"spec.cni.manifest": "give exactly one of file, url or configMapRef"}),
    ({"configMapRef": {"key": "manifest.yaml"}},
     {"spec.cni.manifest.configMapRef.name": "is required"}),
    ({"configMapRef": {"name": "Bad_Name"}},
     {"spec.cni.manifest.configMapRef.name":
      "\"Bad_Name\" is not a valid Kubernetes name (lower case, digits, '-', '.')"}),
    ({"configMapRef": {"name": "cni", "key": "../etc/passwd"}},
     {"spec.cni.manifest.configMapRef.key":
      "\"../etc/passwd\" is not a ConfigMap key (letters, digits, '-', '_', '.')"}),
    ({"configMapRef": {"name": "cni"}, "apply": "sometimes"},
     {"spec.cni.manifest.apply": None}),
], ids=["file+configmap", "url+configmap", "none", "no-name", "bad-name", "bad-key",
        "bad-apply"])
def test_manifest_source_mistakes_name_the_field(tmp_path: Path, manifest: dict[str, Any],
                                                 expected: dict[str, str | None]) -> None:
    shown = errors(tmp_path, manifest)
    assert set(shown) == set(expected), shown
    for path, message in expected.items():
        if message is not None:
            assert shown[path] == message


def machine(*, control_plane: bool, initialized: bool | None) -> MachineFacts:
    return MachineFacts("site-a", "m-0", "uid", "c1", control_plane=control_plane,
                        control_plane_initialized=initialized)


CP_FIRST = machine(control_plane=True, initialized=False)
CP_LATER = machine(control_plane=True, initialized=True)
WORKER = machine(control_plane=False, initialized=False)


@pytest.mark.parametrize(("apply", "facts", "applied_before", "expected", "why"), [
    ("auto", CP_FIRST, False, True,
     "Machine site-a/m-0 is labelled cluster.x-k8s.io/control-plane and Cluster "
     "site-a/c1's control plane is not initialized yet: the first control-plane node"),
    ("auto", CP_LATER, False, False,
     "Cluster site-a/c1's control plane is already initialized: this is not the first "
     "control-plane node"),
    ("auto", CP_LATER, True, True,
     "this node applied it before (journal); applying converges"),
    ("auto", WORKER, False, False,
     "Machine site-a/m-0 is a worker (no label cluster.x-k8s.io/control-plane): workers "
     "never apply it"),
    ("always", WORKER, True, False,
     "Machine site-a/m-0 is a worker (no label cluster.x-k8s.io/control-plane): workers "
     "never apply it"),
    ("auto", None, False, False,
     "spec.cni.manifest.apply is auto and no Machine was read to tell the first "
     "control-plane node: set apply: always on it"),
    ("auto", machine(control_plane=True, initialized=None), False, False,
     "Machine site-a/m-0 names no Cluster to tell whether its control plane is initialized"),
    ("always", None, False, True, "spec.cni.manifest.apply is always"),
    ("always", CP_LATER, False, True, "spec.cni.manifest.apply is always"),
    ("never", CP_FIRST, False, False, "spec.cni.manifest.apply is never"),
], ids=["first-cp", "later-cp", "applied-before", "worker", "worker-despite-always",
        "no-machine", "no-cluster", "always", "always-overrides-cluster", "never"])
def test_the_first_control_plane_node_decision(
        apply: str, facts: MachineFacts | None, applied_before: bool, expected: bool,
        why: str) -> None:
    spec = ManifestSpec(file="/srv/cni.yaml", apply=apply)  # type: ignore[arg-type]
    decision = decide(spec, facts, applied_before)
    assert (decision.apply, decision.why) == (expected, why)


@pytest.mark.parametrize(("status", "initialized"), [
    ({}, False),
    ({"initialization": {"infrastructureProvisioned": True}}, False),
    ({"initialization": {"controlPlaneInitialized": True}}, True),  # v1beta2
    ({"initialization": {"controlPlaneInitialized": False}}, False),
    ({"controlPlaneReady": True}, True),  # v1beta1
    ({"conditions": [{"type": "ControlPlaneInitialized", "status": "True"}]}, True),
    ({"conditions": [{"type": "ControlPlaneInitialized", "status": "False"}]}, False),
    ({"v1beta2": {"conditions": [{"type": "ControlPlaneInitialized", "status": "True"}]}},
     True),
    ({"deprecated": {"v1beta1": {"conditions": [
        {"type": "ControlPlaneInitialized", "status": "True"}]}}}, True),
])
def test_cluster_control_plane_initialized_in_either_capi_version(
        status: dict[str, Any], initialized: bool) -> None:
    assert control_plane_initialized(status) is initialized
