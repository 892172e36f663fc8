"""The CNI manifest: read (file, https URL checked against its sha256, or a ConfigMap on
the management cluster), applied to the workload cluster with server-side apply by the
first control-plane node only (`decide`), then the wait for this node's Node to be Ready.

The cluster is behind the small `WorkloadCluster` interface (apply one object, read a
Node's Ready condition), so the phase does not care how it is reached;
`agent/kube/workload.py` holds the implementation on a kubeconfig.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from typing import Any, Protocol

from agent.config.cni import ConfigMapRef, ManifestSpec
from agent.errors import PermanentError, Reason, TemporaryError
from agent.host import Host
from agent.kube.client import Client, resource_path
from agent.kube.errors import NotFound
from agent.kube.facts import CONTROL_PLANE_LABEL, MachineFacts
from agent.kube.workload import NodeReadiness
from agent.recordtype import record

POLL_INTERVAL = 5.0
"""Seconds between looks at the Node while waiting for Ready."""


class ManifestError(PermanentError):
    reason = Reason.CNIBroken


class WorkloadCluster(Protocol):
    def apply(self, obj: dict[str, Any]) -> None:
        """Server-side apply one object under the agent's field manager."""

    def node_readiness(self, name: str) -> NodeReadiness:
        """The Node's Ready condition (not ready when the Node is not registered yet)."""


@record(frozen=True)
class Manifest:
    origin: str
    sha256: str
    objects: list[dict[str, Any]]


@record(frozen=True)
class Decision:
    """Whether this node applies the manifest, and why (shown by `plan`)."""

    apply: bool
    why: str


def decide(spec: ManifestSpec, machine: MachineFacts | None, applied_before: bool) -> Decision:
    """Is this the first control-plane node? A worker Machine never is; otherwise the
    config says so (`apply: always`/`never`), or else the Machine: labelled
    control-plane while its Cluster's control plane is not initialized yet. CAPI sets
    that once the first control plane answers, so a node that applied the manifest
    before keeps applying it (server-side apply converges), and a retry after the
    Cluster turned initialized does not skip it."""
    if machine is not None and not machine.control_plane:
        return Decision(False, f"Machine {machine.namespace}/{machine.name} is a worker (no "
                               f"label {CONTROL_PLANE_LABEL}): workers never apply it")
    if spec.apply != "auto":
        return Decision(spec.apply == "always", f"spec.cni.manifest.apply is {spec.apply}")
    if machine is None:
        return Decision(False, "spec.cni.manifest.apply is auto and no Machine was read to "
                               "tell the first control-plane node: set apply: always on it")
    if applied_before:
        return Decision(True, "this node applied it before (journal); applying converges")
    cluster = f"Cluster {machine.namespace}/{machine.cluster_name}"
    if machine.control_plane_initialized is None:
        return Decision(False, f"Machine {machine.namespace}/{machine.name} names no Cluster "
                               "to tell whether its control plane is initialized")
    if machine.control_plane_initialized:
        return Decision(False, f"{cluster}'s control plane is already initialized: this is "
                               "not the first control-plane node")
    return Decision(True, f"Machine {machine.namespace}/{machine.name} is labelled "
                          f"{CONTROL_PLANE_LABEL} and {cluster}'s control plane is not "
                          "initialized yet: the first control-plane node")


def load_manifest(host: Host, spec: ManifestSpec, management: Client | None = None,
                  machine: MachineFacts | None = None) -> Manifest:
    """The manifest's objects, in order; a URL's body must match its sha256."""
    if spec.url is not None:
        from agent.phases.cni.install import download

        payload = download(host, spec.url, "spec.cni.manifest.url",
                           "give the manifest as spec.cni.manifest.file or configMapRef")
        origin = spec.url
    elif spec.config_map_ref is not None:
        payload, origin = _from_configmap(spec.config_map_ref, management, machine)
    else:
        assert spec.file is not None  # the config requires one of file or url
        try:
            payload, origin = host.read_bytes(spec.file), spec.file
        except OSError as err:
            raise ManifestError(f"cannot read the CNI manifest {spec.file}: {err.strerror}",
                                hint="fix spec.cni.manifest.file") from err
    actual = hashlib.sha256(payload).hexdigest()
    if spec.sha256 is not None and actual != spec.sha256:
        raise ManifestError(f"CNI manifest {origin} has sha256 {actual}, expected "
                            f"{spec.sha256}; nothing was applied",
                            hint="fix spec.cni.manifest.sha256 or the manifest")
    return Manifest(origin, actual, parse_objects(payload, origin))


def _from_configmap(ref: ConfigMapRef, management: Client | None,
                    machine: MachineFacts | None) -> tuple[bytes, str]:
    """The manifest from a ConfigMap in the Machine's namespace (`data`, or base64
    `binaryData`), read with the agent's management credentials."""
    where = "spec.cni.manifest.configMapRef"
    if management is None or machine is None:
        raise ManifestError(f"{where} needs the management cluster and the Machine, and "
                            "none was read", hint="set spec.management and spec.identity, "
                                                  "or give the manifest as file or url")
    origin = f"ConfigMap {machine.namespace}/{ref.name} key {ref.key}"
    try:
        obj = management.get(resource_path("", "v1", "configmaps",
                                           namespace=machine.namespace, name=ref.name))
    except NotFound as err:
        raise ManifestError(f"ConfigMap {machine.namespace}/{ref.name} ({where}.name) does "
                            "not exist", hint="create it, or fix the name") from err
    if ref.key in (obj.get("data") or {}):
        return str(obj["data"][ref.key]).encode(), origin
    if ref.key in (obj.get("binaryData") or {}):
        try:
            return base64.b64decode(str(obj["binaryData"][ref.key]), validate=True), origin
        except binascii.Error as err:
            raise ManifestError(f"{origin}: binaryData is not base64") from err
    raise ManifestError(f"ConfigMap {machine.namespace}/{ref.name} has no key {ref.key} "
                        f"({where}.key)", hint="fix the key, or add it to the ConfigMap")


def parse_objects(payload: bytes, origin: str) -> list[dict[str, Any]]:
    """Every object of a multi-document YAML (a `List` is unpacked), each checked for
    apiVersion, kind and metadata.name."""
    import yaml

    from agent import yamlsafe

    try:
        docs = yamlsafe.load_all(payload.decode())
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ManifestError(f"CNI manifest {origin} is not valid YAML: {err}") from err
    objects: list[dict[str, Any]] = []
    for doc in docs:
        if doc is None:
            continue
        items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" \
            else [doc]
        for obj in items or []:
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            if not (isinstance(obj, dict) and isinstance(obj.get("apiVersion"), str)
                    and isinstance(obj.get("kind"), str) and isinstance(meta, dict)
                    and isinstance(meta.get("name"), str)):
                raise ManifestError(f"CNI manifest {origin}: document {len(objects) + 1} is "
                                    "not a Kubernetes object (apiVersion, kind, metadata.name)")
            objects.append(obj)
    if not objects:
        raise ManifestError(f"CNI manifest {origin} holds no objects")
    return objects


def wait_node_ready(cluster: WorkloadCluster, node: str, timeout: float, host: Host,
                    progress: Callable[[str], None], since: str) -> NodeReadiness:
    """Wait (bounded) for the Node's Ready condition, saying what it waits for; the
    Ready state once True. `since` names what should have made it Ready."""
    start = host.clock.monotonic()
    while True:
        state = cluster.node_readiness(node)
        if state.ready:
            return state
        waited = host.clock.monotonic() - start
        if waited >= timeout:
            raise TemporaryError(
                f"Node {node} is not Ready {waited:.0f}s after {since}: {state.detail}",
                reason=Reason.CNIBroken,
                hint="check the CNI DaemonSet's pods on this node and the kubelet's log; "
                     "the agent retries")
        progress(f"waiting for Node {node} to be Ready ({state.detail}; "
                 f"{waited:.0f}s of {timeout:.0f}s)")
        host.clock.sleep(min(POLL_INTERVAL, timeout - waited))
