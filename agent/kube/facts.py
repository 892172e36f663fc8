"""What the agent knows about its Machine, as read from the management cluster."""

from __future__ import annotations

from agent.recordtype import record

CONTROL_PLANE_LABEL = "cluster.x-k8s.io/control-plane"
"""CAPI's label on control-plane Machines (set by the control-plane provider)."""


@record(frozen=True)
class MachineFacts:
    """The Machine this node is, reduced to what the phases use."""

    namespace: str
    name: str
    uid: str
    cluster_name: str
    kubernetes_version: str | None = None
    """Machine.spec.version, e.g. `v1.31.2`."""
    control_plane_endpoint: str | None = None
    """The Cluster's spec.controlPlaneEndpoint as `host:port`."""
    bootstrap_format: str | None = None
    """`cloud-config` or `ignition`, from the bootstrap Secret's `format` key."""
    bootstrap_data: str | None = None
    """The bootstrap Secret's `value`: secret, never logged."""
    provider_id: str | None = None
    control_plane: bool = False
    """The Machine carries CAPI's label `cluster.x-k8s.io/control-plane`."""
    control_plane_initialized: bool | None = None
    """Whether the Cluster's control plane was initialized when it was read (v1beta2
    `status.initialization.controlPlaneInitialized`; v1beta1 `status.controlPlaneReady`
    or the `ControlPlaneInitialized` condition); None: no Cluster was read."""
    api_version: str = "v1beta2"
    """The cluster.x-k8s.io version the Machine was read with, one the server serves:
    what an ownerReference to it names (garbage collection resolves it by that version;
    CAPI before 1.11 serves no v1beta2)."""
