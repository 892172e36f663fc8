"""The least-privilege RBAC of one node's identity, rendered from
agent/templates/rbac/node-rbac.yaml (shipped for operators; the tests apply exactly it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from agent.config import checks
from agent.templates import render

TEMPLATE = "rbac/node-rbac.yaml"


@dataclass(frozen=True)
class NodeIdentity:
    namespace: str
    machine: str
    cluster: str
    bootstrap_secret: str
    subject_name: str
    """A ServiceAccount name, or the user name the node's credentials authenticate as."""
    subject_kind: Literal["ServiceAccount", "User", "Group"] = "ServiceAccount"
    subject_namespace: str = ""
    """The ServiceAccount's namespace (default: `namespace`)."""
    config_kind: Literal["configmap", "secret", ""] = ""
    config_name: str = ""
    discovery: bool = False
    """Also allow listing Machines (discovery by label or providerID)."""
    cni_manifest_configmap: str = ""
    """The ConfigMap of spec.cni.manifest.configMapRef (first control-plane node)."""


def render_node_rbac(identity: NodeIdentity) -> str:
    """The Role and RoleBinding as YAML. Names are checked, since they reach a manifest."""

    values = asdict(identity)
    values["subject_namespace"] = identity.subject_namespace or identity.namespace
    for key in ("namespace", "machine", "cluster", "bootstrap_secret", "config_name",
                "cni_manifest_configmap"):
        problem = checks.k8s_name(values[key]) if values[key] else None
        if problem:
            raise ValueError(f"{key}: {problem}")
    if any(c in identity.subject_name for c in "\n\"'{}[]#"):
        raise ValueError(f"subject_name: {identity.subject_name!r} is not a plain name")
    return render(TEMPLATE, **values)
