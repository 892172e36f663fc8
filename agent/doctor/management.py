"""The management cluster: reachable, TLS valid, credentials accepted, RBAC enough for
every verb the agent uses (SelfSubjectAccessReview), the Machine found, its bootstrap
Secret present, and the configuration it points at valid."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from agent.config.sources.chain import default_sources
from agent.errors import AgentError, ConfigError
from agent.kube.claims import claim_key, claim_name
from agent.kube.client import Client, resource_path
from agent.kube.errors import Unauthorized, Unreachable
from agent.kube.facts import CONTROL_PLANE_LABEL
from agent.kube.kubeconfig import load_credentials
from agent.kube.machine import GROUP, MachineReader
from agent.kube.rbac import capi_claims
from agent.kube.readonly import read_only_client
from agent.phases.checks import Check, Doctor, not_checked
from agent.phases.join import token_checks
from agent.recordtype import record
from agent.session import load

PHASE = "management"
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
RBAC_FIX = ("apply templates/rbac/node-rbac.yaml rendered for this node "
            "(agent.kube.rbac.render_node_rbac) to its identity")
LATER = ("tls", "credentials", "machine", "bootstrap-secret", "bootstrap-token")


@record(frozen=True)
class Permission:
    verb: str
    group: str
    resource: str
    namespace: str
    name: str = ""
    subresource: str = ""
    required: bool = True
    """False: the agent only needs it for an optional feature; a denial is a warning."""
    why: str = ""

    @property
    def check_name(self) -> str:
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"rbac:{self.verb}:{self.resource}{sub}"


def checks(doctor: Doctor) -> Iterator[Check]:
    config = doctor.config
    if config is None:
        yield not_checked(PHASE, "credentials", "the configuration is invalid")
        return
    spec = config.spec.management
    if not spec.configured:
        yield Check(PHASE, "configured", "warn",
                    "spec.management is not set: nothing is read from or reported to a "
                    "Machine", "set spec.management.kubeconfig (or server and tokenFile) "
                    "when the node belongs to a Cluster API cluster")
        return
    try:
        creds = load_credentials(spec, doctor.host, material=doctor.scratch)
    except AgentError as err:
        doctor.management_problem = "the credentials could not be loaded"
        yield Check(PHASE, "credentials", "fail", err.message, err.hint or "")
        return
    server = creds.server
    timeout = min(float(spec.request_timeout), 5.0)
    url = urlsplit(server)
    address = (url.hostname or "", url.port or 443)
    try:
        with socket.create_connection(address, timeout=timeout):
            pass
    except OSError as err:
        doctor.management_problem = f"{server} is unreachable"
        yield Check(PHASE, "reachable", "fail",
                    f"cannot connect to {address[0]} port {address[1]}: "
                    f"{err.strerror or err}",
                    "check the route, firewall and DNS towards the management API "
                    "(spec.management)")
        for name in LATER:
            yield not_checked(PHASE, name, doctor.management_problem)
        return
    yield Check(PHASE, "reachable", "pass", f"{address[0]} port {address[1]} accepts TCP")
    client = read_only_client(creds, timeout)
    doctor.client = client
    yield from _identity(doctor, client, server)


def _identity(doctor: Doctor, client: Client, server: str) -> Iterator[Check]:
    """TLS and credentials (one review), the RBAC, the Machine and what it points at."""
    assert doctor.config is not None
    spec = doctor.config.spec
    named = spec.identity.machine
    namespace = named.namespace if named else (spec.identity.discovery.namespace or "")
    try:
        _review(client, Permission("get", GROUP, "machines", namespace,
                                   named.name if named else ""))
    except Unreachable as err:
        doctor.management_problem = f"{server} does not answer over TLS"
        tls = "TLS verification" in err.message
        yield Check(PHASE, "tls", "fail", err.message,
                    err.hint if tls else "check that the URL is the API server's")
        for name in LATER[1:]:
            yield not_checked(PHASE, name, doctor.management_problem)
        return
    except Unauthorized as err:
        doctor.management_problem = "the credentials are refused"
        yield Check(PHASE, "tls", "pass", f"{server} presents a certificate the CA signed")
        yield Check(PHASE, "credentials", "fail", err.message, err.hint or "")
        for name in LATER[2:]:
            yield not_checked(PHASE, name, doctor.management_problem)
        return
    yield Check(PHASE, "tls", "pass", f"{server} presents a certificate the CA signed")
    yield Check(PHASE, "credentials", "pass", "the API server accepts the node's credentials")
    try:
        view = MachineReader(client, doctor.host, wait=0.0).read(spec.identity)
    except AgentError as err:
        doctor.management_problem = "the Machine could not be read"
        yield from _rbac(doctor, client, namespace, named.name if named else "", {})
        yield Check(PHASE, "machine", "fail", err.message, err.hint or "")
        for name in LATER[3:]:
            yield not_checked(PHASE, name, doctor.management_problem)
        return
    doctor.machine = view
    facts = view.facts
    raw = client.get(resource_path(GROUP, view.version, "machines",
                                   namespace=facts.namespace, name=facts.name))
    yield from _rbac(doctor, client, facts.namespace, facts.name, raw)
    yield Check(PHASE, "machine", "pass",
                f"Machine {facts.namespace}/{facts.name} (read as {GROUP}/{view.version}), "
                f"cluster {facts.cluster_name or '(none)'}, Kubernetes "
                f"{facts.kubernetes_version or '(unset)'}",
                details={"namespace": facts.namespace, "name": facts.name,
                         "version": view.version, "uid": facts.uid})
    secret = (raw.get("spec") or {}).get("bootstrap", {}).get("dataSecretName")
    if not secret:
        yield Check(PHASE, "bootstrap-secret", "fail",
                    f"Machine {facts.name} has no spec.bootstrap.dataSecretName yet",
                    "check the bootstrap provider (KubeadmConfig) of this Machine; the "
                    "agent waits for it up to spec.management.bootstrapWait")
    elif facts.bootstrap_data is None:
        yield Check(PHASE, "bootstrap-secret", "fail",
                    f"Secret {facts.namespace}/{secret} does not exist or has no key value",
                    "check the bootstrap provider; CABPK writes the Secret once the "
                    "KubeadmConfig is ready")
    else:
        yield Check(PHASE, "bootstrap-secret", "pass",
                    f"Secret {facts.namespace}/{secret} holds "
                    f"{facts.bootstrap_format or 'bootstrap'} data")
    yield from _machine_config(doctor)
    yield from token_checks(doctor, PHASE)


def _machine_config(doctor: Doctor) -> Iterator[Check]:
    """The configuration the Machine's annotation points at, merged over the local one."""
    if doctor.machine is None or doctor.machine.config is None:
        return
    source = doctor.machine.config
    local = list(doctor.files)
    try:
        doctor.loaded = load(doctor.host, [*default_sources(local), source])
    except ConfigError as err:
        problems = [str(e) for e in err.errors]
        yield Check(PHASE, "machine-config", "fail",
                    f"{source.origin}: {'; '.join(problems)}",
                    "fix the object the Machine's annotation machine-agent.io/config names",
                    {"errors": problems})
        return
    yield Check(PHASE, "machine-config", "pass",
                f"{source.origin} merges into a valid AgentConfig")


def permissions(doctor: Doctor, namespace: str, machine: str,
                raw: dict[str, Any]) -> list[Permission]:
    """Every request the agent makes, as RBAC sees it (templates/rbac/node-rbac.yaml)."""
    assert doctor.config is not None
    spec = doctor.config.spec
    perms: list[Permission] = []
    if spec.identity.machine is None:
        perms.append(Permission("list", GROUP, "machines", namespace,
                                why="discovery by label or providerID"))
    if machine:
        perms += [Permission(v, GROUP, "machines", namespace, machine)
                  for v in ("get", "list", "watch")]
        lifecycle = doctor.config.spec.lifecycle
        perms.append(Permission("patch", GROUP, "machines", namespace, machine,
                                required=lifecycle.watch and bool(lifecycle.on_delete.steps),
                                why="the pre-terminate hook that holds the Machine for "
                                    "spec.lifecycle.onDelete"))
        perms.append(Permission("patch", GROUP, "machines", namespace, machine, "status",
                                required=spec.reporting.conditions,
                                why="conditions on the Machine"))
    machine_spec = raw.get("spec") or {}
    if machine_spec.get("clusterName"):
        perms.append(Permission("get", GROUP, "clusters", namespace,
                                str(machine_spec["clusterName"])))
    secret = (machine_spec.get("bootstrap") or {}).get("dataSecretName")
    if secret:
        perms += [Permission(v, "", "secrets", namespace, str(secret))
                  for v in ("get", "list", "watch")]
    ref = ((raw.get("metadata") or {}).get("annotations") or {}).get(
        "machine-agent.io/config")
    if ref and "/" in str(ref):
        kind, _, name = str(ref).partition("/")
        perms.append(Permission("get", "", f"{kind.lower()}s", namespace, name))
    manifest = spec.cni.manifest
    if manifest is not None and manifest.config_map_ref is not None and namespace:
        labels = (raw.get("metadata") or {}).get("labels") or {}
        perms.append(Permission("get", "", "configmaps", namespace,
                                manifest.config_map_ref.name,
                                required=CONTROL_PLANE_LABEL in labels,
                                why="the CNI manifest of spec.cni.manifest.configMapRef"))
    if namespace:
        perms.append(Permission("create", "events.k8s.io", "events", namespace,
                                required=spec.reporting.events, why="Events"))
        # what the capi plugin does: create a claim, watch it (list+watch), read its
        # IPAddress, delete a refused or released claim; by name where the Role names it
        uid = str((raw.get("metadata") or {}).get("uid") or "")
        claims = capi_claims(spec.network)
        named = sorted({claim_name(machine, iface, family, claim_key(uid, iface, family))
                        for iface, family in claims})
        perms += [Permission(v, "ipam.cluster.x-k8s.io", r, namespace, name, required=False,
                             why="IPAM through the management cluster")
                  for r, verbs, names in (("ipaddressclaims", ("create",), [""]),
                                          ("ipaddressclaims",
                                           ("get", "list", "watch", "delete"), named),
                                          ("ipaddresses", ("get",), [""]))
                  for v in verbs for name in names if claims]
    return perms


def _rbac(doctor: Doctor, client: Client, namespace: str, machine: str,
          raw: dict[str, Any]) -> Iterator[Check]:
    for perm in permissions(doctor, namespace, machine, raw):
        target = f"{perm.resource}{'/' + perm.subresource if perm.subresource else ''}"
        where = f"{namespace}/{perm.name}" if perm.name else f"namespace {namespace}"
        try:
            allowed, reason = _review(client, perm)
        except AgentError as err:
            yield Check(PHASE, perm.check_name, "fail", f"review not answered: {err.message}",
                        err.hint or "")
            continue
        if allowed:
            yield Check(PHASE, perm.check_name, "pass", f"may {perm.verb} {target} {where}")
            continue
        why = f" ({perm.why})" if perm.why else ""
        yield Check(PHASE, perm.check_name, "fail" if perm.required else "warn",
                    f"may not {perm.verb} {target} {where}{why}"
                    + (f": {reason}" if reason else ""), RBAC_FIX)


def _review(client: Client, perm: Permission) -> tuple[bool, str]:
    attrs = {k: v for k, v in (("namespace", perm.namespace), ("verb", perm.verb),
                               ("group", perm.group), ("resource", perm.resource),
                               ("subresource", perm.subresource), ("name", perm.name)) if v}
    answer = client.create(SSAR, {"apiVersion": "authorization.k8s.io/v1",
                                  "kind": "SelfSubjectAccessReview",
                                  "spec": {"resourceAttributes": attrs}})
    status = answer.get("status") or {}
    return bool(status.get("allowed")), str(status.get("reason") or "")
