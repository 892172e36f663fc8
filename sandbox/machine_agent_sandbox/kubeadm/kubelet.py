"""The node's kubelet service, as kubeadm starts and stops it: `systemctl restart
kubelet` in kubelet-start (app/phases/kubelet/kubelet.go TryRestartKubelet), `systemctl
stop kubelet` in reset's cleanup-node (app/cmd/phases/reset/cleanupnode.go). The
sandbox has no systemd: a marker under the node's root says the kubelet runs, and the
test kit's kubelet (kubeadm_standin.kubelet_sync) acts only while it is there."""

from __future__ import annotations

from pathlib import Path

RUNNING = "run/machine-agent-sandbox/kubelet.running"


def start(root: Path) -> None:
    marker = root / RUNNING
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("active\n")


def stop(root: Path) -> None:
    (root / RUNNING).unlink(missing_ok=True)


def running(root: Path) -> bool:
    return (root / RUNNING).exists()
