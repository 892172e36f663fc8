"""`kubeadm join --config FILE`: preflight, discovery, (a control plane's prepare),
kubelet-start, (its etcd join), in kubeadm's order; and the world's failures."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from machine_agent_sandbox.kubeadm import kubelet
from machine_agent_sandbox.kubeadm.cluster_info import discover
from machine_agent_sandbox.kubeadm.config import join_args, load_join_configuration
from machine_agent_sandbox.kubeadm.control_plane import control_plane_join, control_plane_prepare
from machine_agent_sandbox.kubeadm.flags import (
    extra_args,
    kubelet_flags,
)
from machine_agent_sandbox.kubeadm.hostname import node_name
from machine_agent_sandbox.kubeadm.join_preflight import control_plane_preflight, files_available
from machine_agent_sandbox.kubeadm.kubelet_start import issue, kubelet_unhealthy, register_node
from machine_agent_sandbox.kubeadm.node import (
    BOOTSTRAP_CONF,
    CA_CERT,
    CA_PEM,
    KUBELET_CONF,
    KUBELET_CONFIG,
    KUBELET_FLAGS,
    Failed,
    kubeconfig_text,
    write_file,
    write_kubeconfig,
)
from machine_agent_sandbox.kubeadm.preflight import manifests_dir_check


def join(root: Path, world: dict[str, Any], args: list[str]) -> int:
    config_path, ignored = join_args(args)
    cfg = load_join_configuration(root / config_path.lstrip("/"))
    reg = cfg.get("nodeRegistration") or {}
    ignored |= {str(x).lower() for x in reg.get("ignorePreflightErrors") or []}
    name = node_name(root, reg.get("name"))
    failure = (world.get("failNext") or [None])[0]
    if failure is not None:
        world["failNext"] = world["failNext"][1:]

    print("[preflight] Running pre-flight checks")
    # app/preflight/checks.go, RunJoinNodeChecks: FileAvailableCheck for the kubeconfigs
    # join writes, and for the CA certificate only on a worker join (a control-plane
    # join's bootstrap data brings the CA files with it).
    files = (KUBELET_CONF, BOOTSTRAP_CONF) + (() if cfg.get("controlPlane") else (CA_CERT,))
    files_available(root, files, failure, ignored,
                     manifests_dir_check(root, world.get("version", "v1.31.2")))

    endpoint = discover(root, cfg, world)
    control_plane = cfg.get("controlPlane")
    if control_plane is not None:
        control_plane_preflight(root, world, control_plane, ignored)
        control_plane_prepare(root, world, control_plane, endpoint, name)

    # app/cmd/phases/join/kubelet.go, runKubeletStartJoinPhase: the bootstrap kubeconfig,
    # and the cluster CA from cluster-info when the node has none yet.
    write_kubeconfig(root / BOOTSTRAP_CONF, kubeconfig_text(endpoint, "tls-bootstrap-token-user"))
    if not (root / CA_CERT).exists():
        write_file(root / CA_CERT, CA_PEM)
    try:
        if name in (world.get("readyNodes") or []):
            raise Failed(f"error execution phase kubelet-start: a Node with name "
                         f"{json.dumps(name)} and status \"Ready\" already exists in the "
                         "cluster. You must delete the existing Node or change the name of "
                         "this new joining Node")
        write_file(root / KUBELET_CONFIG, "apiVersion: kubelet.config.k8s.io/v1beta1\n"
                                      "kind: KubeletConfiguration\n")
        write_file(root / KUBELET_FLAGS, kubelet_flags(root, name, extra_args(reg)))
        print("[kubelet-start] Starting the kubelet")
        kubelet.start(root)
        if failure and failure.startswith("phase-error:"):
            _, phase, message = failure.split(":", 2)  # app/cmd/phases/workflow/runner.go
            raise Failed(f"error execution phase {phase}: {message}")
        if failure and failure.startswith("hang:"):
            time.sleep(min(float(failure.split(":", 1)[1]), 60))
        if failure == "kubelet-unhealthy":
            kubelet_unhealthy(world.get("version", "v1.31.2"))
        print("[kubelet-start] Waiting for the kubelet to perform the TLS Bootstrap")
        api = world.get("apiServer")
        credential = issue(root, endpoint, api, name) if api else None
        write_kubeconfig(root / KUBELET_CONF,
                          kubeconfig_text(endpoint, "default-auth", api, credential))
        if failure == "killed-after:kubelet-conf":
            _killed_with_the_agent(world)
    finally:
        (root / BOOTSTRAP_CONF).unlink(missing_ok=True)
    if control_plane is not None:
        control_plane_join(root, world, name)
    if api and credential and failure != "node-not-registered":
        register_node(root, endpoint, api, credential, name)
    world.setdefault("joins", []).append(name)
    world.setdefault("readyNodes", []).append(name)
    if failure == "killed-after:registered":
        _killed_with_the_agent(world)
    print("\nThis node has joined the cluster:\n* Certificate signing request was sent to "
          "apiserver and a response was received.\n* The Kubelet was informed of the new "
          "secure connection details.")
    return 0


def _killed_with_the_agent(world: dict[str, Any]) -> None:
    """SIGKILL the agent that ran this kubeadm (its parent: the wrapper execs), then
    this process: the world is saved first, so the failure is consumed."""
    world_path = os.environ.get("KUBEADM_STANDIN_WORLD")
    if world_path:
        Path(world_path).write_text(json.dumps(world, indent=1))
    os.kill(os.getppid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
