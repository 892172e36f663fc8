"""The least-privilege RBAC of one node's identity, rendered from
templates/rbac/node-rbac.yaml (shipped for operators; the tests apply exactly it)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Literal

from agent.config import checks
from agent.config.network import NetworkSpec
from agent.kube.claims import UID, claim_key, claim_name
from agent.recordtype import record
from agent.templating import render

TEMPLATE = "rbac/node-rbac.yaml"


@record(frozen=True)
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
    machine_uid: str = ""
    """The Machine's metadata.uid: its IPAddressClaims are named after it."""
    ipam_claims: tuple[tuple[str, str], ...] = ()
    """(interface, family) of every address the node claims with the capi IPAM plugin
    (`capi_claims(config.spec.network)`); rights on exactly those claims are granted."""


def capi_claims(network: NetworkSpec) -> tuple[tuple[str, str], ...]:
    """(interface, family) of the addresses `network` claims through the capi plugin."""
    return tuple((iface.name, a.ipam.family) for iface in network.interfaces
                 for a in iface.addresses if a.ipam is not None and a.ipam.plugin == "capi")


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
    # the claims' names are a hash of it: it is an object UID, as the API server gives one
    problems["machine_uid"] = (
        "is needed to name the IPAddressClaims" if identity.ipam_claims
        and not identity.machine_uid else None if not identity.machine_uid
        or UID.fullmatch(identity.machine_uid)
        else f"{identity.machine_uid!r} is not an object UID (letters, digits, '-')")
    for i, (iface, family) in enumerate(identity.ipam_claims):
        problems[f"ipam_claims[{i}][0]"] = checks.interface_name(iface)
        problems[f"ipam_claims[{i}][1]"] = checks.one_of(("ipv4", "ipv6"))(family)
    for key, problem in problems.items():
        if problem:
            raise ValueError(f"{key}: {problem}")
    values["claim_names"] = sorted({
        claim_name(identity.machine, iface, family,
                   claim_key(identity.machine_uid, iface, family))
        for iface, family in identity.ipam_claims})
    return render(TEMPLATE, **values)
