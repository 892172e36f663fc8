"""The name kubeadm gives the node (kubernetes/kubernetes cmd/kubeadm/app/util/
GetHostname, a copy of k8s.io/component-helpers' node util): nodeRegistration.name, else
the host name (Go's os.Hostname: /proc/sys/kernel/hostname, else uname), trimmed and
lowercased. Read under the node's root: a sandbox node has its own host name, not the
machine's that runs the sandbox."""

from __future__ import annotations

import os
from pathlib import Path

KERNEL_HOSTNAME = "proc/sys/kernel/hostname"


def node_name(root: Path, configured: object = None) -> str:
    name = str(configured) if configured else ""
    if not name.strip():
        try:
            name = (root / KERNEL_HOSTNAME).read_text()
        except OSError:
            name = os.uname().nodename
    return name.strip().lower()


FLAGS = "var/lib/kubelet/kubeadm-flags.env"


def kubelet_flags(root: Path, name: str) -> str:
    """kubeadm-flags.env as kubeadm writes it (app/phases/kubelet/flags.go
    buildKubeletArgs): `--hostname-override` only when the node's name is not its host
    name (the kubelet then takes the host name itself)."""
    args = f"--hostname-override={name}" if name != node_name(root) else ""
    return f'KUBELET_KUBEADM_ARGS="{args}"\n'


def kubelet_node_name(root: Path) -> str | None:
    """The name the node's kubelet registers with: its --hostname-override, else the host
    name (pkg/kubelet: nodeutil.GetHostname); None before kubeadm wrote its flags."""
    try:
        flags = (root / FLAGS).read_text()
    except OSError:
        return None
    if "--hostname-override=" not in flags:
        return node_name(root)
    return flags.split("--hostname-override=", 1)[1].split('"')[0].split()[0]
