"""The CNI manifest: read (file, or https URL checked against its sha256), applied to the
workload cluster with server-side apply, then the wait for this node's Node to be Ready.

The cluster is behind the small `WorkloadCluster` interface (apply one object, read a
Node's Ready condition), so the phase does not care how it is reached;
`agent/kube/workload.py` holds the implementation on a kubeconfig.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from agent.config.cni import ManifestSpec
from agent.errors import PermanentError, Reason, TemporaryError
from agent.host import Host
from agent.kube.workload import NodeReadiness

POLL_INTERVAL = 5.0
"""Seconds between looks at the Node while waiting for Ready."""


class ManifestError(PermanentError):
    reason = Reason.CNIBroken


class WorkloadCluster(Protocol):
    def apply(self, obj: dict[str, Any]) -> None:
        """Server-side apply one object under the agent's field manager."""

    def node_readiness(self, name: str) -> NodeReadiness:
        """The Node's Ready condition (not ready when the Node is not registered yet)."""


@dataclass(frozen=True)
class Manifest:
    origin: str
    sha256: str
    objects: list[dict[str, Any]]


def load_manifest(host: Host, spec: ManifestSpec) -> Manifest:
    """The manifest's objects, in order; a URL's body must match its sha256."""
    if spec.url is not None:
        from agent.phases.cni.install import download

        payload = download(spec.url, "spec.cni.manifest.url",
                           "put the manifest on the node (spec.cni.manifest.file)")
        origin = spec.url
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


def parse_objects(payload: bytes, origin: str) -> list[dict[str, Any]]:
    """Every object of a multi-document YAML (a `List` is unpacked), each checked for
    apiVersion, kind and metadata.name."""
    import yaml

    try:
        docs = list(yaml.safe_load_all(payload.decode()))
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
