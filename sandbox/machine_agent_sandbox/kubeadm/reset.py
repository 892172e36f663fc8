"""`kubeadm reset`'s cleanup-node phase (kubernetes/kubernetes
cmd/kubeadm/app/cmd/phases/reset/cleanupnode.go runCleanupNode): stop the kubelet, then
delete the contents of the directories kubeadm and the kubelet fill
(resetConfigDir/CleanDir: the directories stay, emptied) and kubeadm's kubeconfig files.
What preKubeadmCommands put in /var/lib/kubelet goes with it."""

from __future__ import annotations

import shutil
from pathlib import Path

from machine_agent_sandbox.kubeadm import kubelet

# app/cmd/phases/reset/cleanupnode.go: dirsToClean (the manifests, the certificates
# directory; /var/lib/kubelet's contents once its mounts are gone), and the kubeconfig
# files of app/constants/constants.go.
DIRS = ("etc/kubernetes/manifests", "var/lib/kubelet", "etc/kubernetes/pki")
FILES = tuple(f"etc/kubernetes/{name}.conf" for name in (
    "admin", "super-admin", "kubelet", "bootstrap-kubelet", "controller-manager",
    "scheduler"))


def cleanup_node(root: Path) -> list[str]:
    """Do what cleanup-node does under `root`; the lines kubeadm prints."""
    said = ["[reset] Stopping the kubelet service"]
    kubelet.stop(root)
    said.append("[reset] Deleting contents of directories: ["
                + " ".join(f"/{d}" for d in DIRS) + "]")
    for rel in DIRS:
        directory = root / rel
        if not directory.is_dir():
            continue
        for entry in directory.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    deleted = [f"/{rel}" for rel in FILES if (root / rel).exists()]
    for rel in FILES:
        (root / rel).unlink(missing_ok=True)
    said.append("[reset] Deleting files: [" + " ".join(deleted) + "]")
    return said
