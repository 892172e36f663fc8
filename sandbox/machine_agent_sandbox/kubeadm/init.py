"""`kubeadm init --config FILE`: the first control plane makes the cluster (its etcd, its
tokens, cluster-info)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from machine_agent_sandbox.kubeadm import kubelet
from machine_agent_sandbox.kubeadm.cluster_info import publish_cluster_info
from machine_agent_sandbox.kubeadm.config import join_args, load_init_configuration
from machine_agent_sandbox.kubeadm.control_plane import control_plane_files
from machine_agent_sandbox.kubeadm.flags import (
    extra_args,
    kubelet_flags,
)
from machine_agent_sandbox.kubeadm.hostname import node_name
from machine_agent_sandbox.kubeadm.join_preflight import files_available
from machine_agent_sandbox.kubeadm.kubelet_start import issue, kubelet_unhealthy, register_node
from machine_agent_sandbox.kubeadm.node import (
    CA_CERT,
    CA_PEM,
    ETCD_MANIFEST,
    KUBELET_CONF,
    KUBELET_CONFIG,
    KUBELET_FLAGS,
    MANIFESTS,
    Failed,
    kubeconfig_text,
    write_file,
    write_kubeconfig,
)


def init(root: Path, world: dict[str, Any], args: list[str]) -> int:
    """`kubeadm init --config FILE` (app/cmd/init.go, phases in app/cmd/phases/init):
    preflight (RunInitNodeChecks), certs (the CA kept when the bootstrap data brought it),
    kubeconfig, etcd, control-plane, kubelet-start, wait-control-plane, upload-config (the
    ClusterConfiguration into the cluster, where a joining control plane reads the
    controlPlaneEndpoint), bootstrap-token (the InitConfiguration's tokens become known to
    discovery), then the kubelet's TLS bootstrap as for a join."""
    config_path, ignored = join_args(args)
    init_cfg, cluster_cfg = load_init_configuration(root / config_path.lstrip("/"))
    reg = init_cfg.get("nodeRegistration") or {}
    ignored |= {str(x).lower() for x in reg.get("ignorePreflightErrors") or []}
    name = node_name(root, reg.get("name"))
    failure = (world.get("failNext") or [None])[0]
    if failure is not None:
        world["failNext"] = world["failNext"][1:]
    print(f"[init] Using Kubernetes version: {world.get('version', 'v1.31.2')}")
    print("[preflight] Running pre-flight checks")
    files_available(root, MANIFESTS, failure, ignored)
    local = init_cfg.get("localAPIEndpoint") or {}
    endpoint = "https://" + str(cluster_cfg.get("controlPlaneEndpoint") or
                                f"{local.get('advertiseAddress', '127.0.0.1')}:"
                                f"{local.get('bindPort', 6443)}")
    if not (root / CA_CERT).exists():
        print("[certs] Generating \"ca\" certificate and key")
        write_file(root / CA_CERT, CA_PEM)
    else:
        print("[certs] Using existing ca certificate authority")
    control_plane_files(root, endpoint, name)
    write_file(root / KUBELET_CONFIG, "apiVersion: kubelet.config.k8s.io/v1beta1\n"
                                  "kind: KubeletConfiguration\n")
    write_file(root / KUBELET_FLAGS, kubelet_flags(root, name, extra_args(reg)))
    print("[kubelet-start] Starting the kubelet")
    kubelet.start(root)
    if failure and failure.startswith("phase-error:"):
        _, phase, message = failure.split(":", 2)
        raise Failed(f"error execution phase {phase}: {message}")
    if failure == "kubelet-unhealthy":
        kubelet_unhealthy(world.get("version", "v1.31.2"))
    world["etcdMembers"] = [name]
    write_file(root / ETCD_MANIFEST, f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd-{name}\n",
           0o600)
    world["clusterConfiguration"] = {k: v for k, v in cluster_cfg.items()
                                     if k not in ("apiVersion", "kind")}
    tokens = world.setdefault("tokens", {}) if world.get("tokens") is not None else None
    for entry in init_cfg.get("bootstrapTokens") or []:
        token_id, _, secret = str(entry.get("token", "")).partition(".")
        if tokens is not None and token_id:
            tokens[token_id] = secret
    if init_cfg.get("certificateKey"):
        world["uploadedCerts"] = {"key": init_cfg["certificateKey"]}
    api = world.get("apiServer")
    if api and tokens is not None:  # bootstrap-token phase: cluster-info, then signed
        print("[bootstrap-token] Creating the \"cluster-info\" ConfigMap in the "
              "\"kube-public\" namespace")
        publish_cluster_info(endpoint, api, tokens)
    credential = issue(root, endpoint, api, name) if api else None
    write_kubeconfig(root / KUBELET_CONF,
                     kubeconfig_text(endpoint, "default-auth", api, credential))
    if api and credential and failure != "node-not-registered":
        register_node(root, endpoint, api, credential, name)
    world.setdefault("joins", []).append(name)
    world.setdefault("readyNodes", []).append(name)
    print("\nYour Kubernetes control-plane has initialized successfully!")
    return 0
