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
    """The Role and RoleBinding as YAML. Every value is checked, since it reaches a
    manifest; a bad one raises ValueError naming its field."""
    values = asdict(identity)
    values["subject_namespace"] = identity.subject_namespace or identity.namespace
    problems = {key: checks.k8s_namespace(values[key])
                for key in ("namespace", "subject_namespace")}
    problems |= {key: checks.k8s_name(values[key]) if values[key] else None
                 for key in ("machine", "cluster", "bootstrap_secret", "config_name",
                             "cni_manifest_configmap")}
    # A ServiceAccount is an object name; a user or group name is what the credentials
    # authenticate as (e.g. system:node:worker-0): any one line of text.
    problems["subject_name"] = (
        checks.k8s_name(identity.subject_name) if identity.subject_kind == "ServiceAccount"
        else checks.safe_text(identity.subject_name) or (
            None if identity.subject_name.strip() else "is empty"))
    problems["subject_kind"] = checks.one_of(("ServiceAccount", "User", "Group"))(
        identity.subject_kind)
    problems["config_kind"] = checks.one_of(("configmap", "secret", ""))(identity.config_kind)
    for key, problem in problems.items():
        if problem:
            raise ValueError(f"{key}: {problem}")
    return render(TEMPLATE, **values)
