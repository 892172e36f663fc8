"""`kubeadm upgrade node` on a worker, as kubeadm does it (cmd/kubeadm/app/cmd/upgrade/
node.go and app/cmd/phases/upgrade): the kubeconfig is the kubelet's (a worker has no
admin.conf), the kubeadm-config ConfigMap is read, a node without a kube-apiserver
manifest skips the prepull and the control-plane phase, kubelet-config backs up
/var/lib/kubelet/config.yaml under /etc/kubernetes/tmp and writes the cluster's
kubelet-config there (app/phases/upgrade/postupgrade.go, WriteKubeletConfigFiles), and
the user is told to upgrade the kubelet package. It never touches the kubelet program:
that is the package manager's, here the agent's. A control plane's upgrade (static Pod
manifests, etcd, certificates) is not stood in for: refused."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from machine_agent_sandbox.kubeadm.node import (
    KUBELET_CONF,
    KUBELET_CONFIG,
    MANIFESTS_DIR,
    Failed,
    write_file,
)

CLUSTER_KUBELET_CONFIG = ("apiVersion: kubelet.config.k8s.io/v1beta1\n"
                          "kind: KubeletConfiguration\n")
"""The kubelet-config ConfigMap's content, as the stand-in's join writes it too."""


def upgrade_node(root: Path, world: dict[str, Any], args: list[str]) -> int:
    if args:
        raise Failed(f"unknown flag: {args[0]}" if args[0].startswith("-")
                     else f"unknown command {args[0]!r} for \"kubeadm upgrade node\"")
    failure = (world.get("failNext") or [None])[0]
    if failure is not None:
        world["failNext"] = world["failNext"][1:]
    if not (root / KUBELET_CONF).exists():
        raise Failed("couldn't create a Kubernetes client from file "
                     f"\"/{KUBELET_CONF}\": failed to load admin kubeconfig: open "
                     f"/{KUBELET_CONF}: no such file or directory")
    print("[upgrade] Reading configuration from the \"kubeadm-config\" ConfigMap in "
          "namespace \"kube-system\"...")
    print("[upgrade] Use 'kubeadm init phase upload-config kubeadm --config "
          "your-config-file' to re-upload it.")
    print("[upgrade/preflight] Running pre-flight checks")
    if (root / MANIFESTS_DIR / "kube-apiserver.yaml").exists():
        raise Failed("the kubeadm stand-in upgrades worker nodes only (this node has a "
                     "kube-apiserver manifest)")
    print("[upgrade/preflight] Skipping prepull. Not a control plane node.")
    print("[upgrade/control-plane] Skipping phase. Not a control plane node.")
    backup = f"etc/kubernetes/tmp/kubeadm-kubelet-config{secrets.randbelow(10**9)}/config.yaml"
    print(f"[upgrade] Backing up kubelet config file to /{backup}")
    write_file(root / backup, (root / KUBELET_CONFIG).read_text())
    if failure and failure.startswith("phase-error:"):
        _, phase, message = failure.split(":", 2)  # app/cmd/phases/workflow/runner.go
        raise Failed(f"error execution phase {phase}: {message}")
    print(f"[kubelet-start] Writing kubelet configuration to file \"/{KUBELET_CONFIG}\"")
    write_file(root / KUBELET_CONFIG, CLUSTER_KUBELET_CONFIG)
    print("[upgrade/kubelet-config] The kubelet configuration for this node was "
          "successfully upgraded!")
    print("[upgrade/addon] Skipping the addon/coredns phase. Not a control plane node.")
    print("[upgrade/addon] Skipping the addon/kube-proxy phase. Not a control plane node.")
    print("[upgrade] The configuration for this node was successfully upgraded!")
    print("[upgrade] Now you should go ahead and upgrade the kubelet package using your "
          "package manager.")
    return 0
