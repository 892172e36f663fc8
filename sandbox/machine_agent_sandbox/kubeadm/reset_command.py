"""`kubeadm reset -f [--skip-phases=...]`: preflight, remove-etcd-member, cleanup-node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from machine_agent_sandbox.kubeadm.flags import (
    kubelet_node_name,
)
from machine_agent_sandbox.kubeadm.hostname import node_name
from machine_agent_sandbox.kubeadm.node import ETCD_MANIFEST, Failed
from machine_agent_sandbox.kubeadm.reset import cleanup_node


def reset(root: Path, world: dict[str, Any], args: list[str]) -> int:
    """app/cmd/reset.go with its phases (app/cmd/phases/reset): preflight,
    remove-etcd-member (a control plane's stacked etcd member, removed through the etcd
    cluster: resetremoveetcdmember.go), cleanup-node (machine_agent_sandbox.kubeadm.reset:
    the kubelet stopped, its directory, the manifests and PKI emptied, the kubeconfig
    files deleted)."""
    skip: set[str] = set()
    force = False
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if name in ("-f", "--force"):
            force = True
        elif name == "--skip-phases":
            skip |= set((value if eq else (args.pop(0) if args else "")).split(","))
        elif name not in ("--v", "-v"):
            raise Failed(f"unknown flag: {name}")
    if not force:
        raise Failed("won't proceed; the user didn't answer (Y|n) in order to continue")
    if "remove-etcd-member" not in skip and (root / ETCD_MANIFEST).exists():
        name = _node_name_of(root)
        members = world.get("etcdMembers") or []
        if name in members:
            members.remove(name)
            print(f"[reset] Removing etcd member: {name}")
        world.setdefault("etcdRemovedBy", []).append(name)
    elif (root / ETCD_MANIFEST).exists():
        print("[reset] Skipping phase remove-etcd-member")
    if "cleanup-node" in skip:
        return 0
    for line in cleanup_node(root):
        print(line)
    return 0


def _node_name_of(root: Path) -> str:
    return kubelet_node_name(root) or node_name(root)
