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

