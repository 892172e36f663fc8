"""After the join: the Node, read from the workload cluster with the kubelet's own
kubelet.conf — the proof that the kubelet runs, is trusted by the cluster and registered
itself. kubeadm join can exit 0 before the kubelet has registered; the agent waits for it
(bounded, with progress) instead of reporting a node the cluster does not know."""

from __future__ import annotations

import os

from agent.errors import Reason, TemporaryError
from agent.host import Host
from agent.kube.workload import KUBELET_CONF
from agent.phases.base import Progress

KERNEL_HOSTNAME = "/proc/sys/kernel/hostname"

POLL_INTERVAL = 2.0
"""Seconds between looks for the Node (the kubelet registers seconds after its start)."""


def kubeadm_node_name(host: Host, configured: str | None) -> str:
    """The Node name kubeadm gives this node (cmd/kubeadm/app/util GetHostname): the
    configuration's nodeRegistration.name, else the host name as Go's os.Hostname reads
    it (/proc/sys/kernel/hostname, else uname), trimmed and lowercased. CAPI's own
    Ignition template names none: its Node is named after the host, not the Machine."""
    name = configured or ""
    if not name.strip():
        name = host.read_text(KERNEL_HOSTNAME) or os.uname().nodename
    return name.strip().lower()


def confirm_node(host: Host, name: str, timeout: float, progress: Progress) -> str:
    """The registered Node's name; KubeletNotHealthy when it does not appear in time."""
    from agent.kube.workload import KubeconfigCluster

    cluster = KubeconfigCluster(host, KUBELET_CONF, reason=Reason.KubeletNotHealthy,
                                missing_hint="kubeadm join writes it; run the agent again "
                                             "to join")
    start, slept = host.clock.monotonic(), 0.0
    while True:
        node = cluster.node(name)
        if node is not None:
            return str(node["metadata"]["name"])
        # Bounded by the time slept as well: a clock that does not move cannot loop.
        waited = max(host.clock.monotonic() - start, slept)
        if waited >= timeout:
            raise TemporaryError(
                f"kubeadm join succeeded but the kubelet has not registered Node {name} on "
                f"{cluster.server} after {waited:.0f}s", reason=Reason.KubeletNotHealthy,
                hint="read `journalctl -u kubelet` (its registration errors); check that "
                     "its --hostname-override is the Node name and that the cluster "
                     "authorizes nodes (Node authorizer, NodeRestriction)")
        progress(f"waiting for the kubelet to register Node {name} ({waited:.0f}s of "
                 f"{timeout:.0f}s)")
        pause = min(POLL_INTERVAL, timeout - waited)
        host.clock.sleep(pause)
        slept += pause
