"""A node root ready to join, and the workload cluster it joins — shared by the suites
and the benchmarks.

The root shows what a healthy node shows: /proc files, a container runtime socket that
answers, `kubeadm` and `kubelet` on PATH. The cluster is an API stand-in listening on
127.0.0.1 (where the kubelet registers its Node after the join) and the world file of the
kubeadm on PATH (which tokens it knows, its CA pin, which Nodes are Ready). Tests only put
kubeadm on PATH; what answers is the stand-in (machine_agent_sandbox/kubeadm_standin.py)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from machine_agent_sandbox.apiserver import ApiServer
from machine_agent_sandbox.kubeadm.cluster_info import spki_pin
from machine_agent_sandbox.kubeadm.hostname import KERNEL_HOSTNAME
from machine_agent_sandbox.kubeadm.kubelet_start import kubelet_sync
from machine_agent_sandbox.kubeadm_standin import install
from machine_agent_sandbox.testkit.bootstrap import CA_HASH

HEALTHY_PROC = {
    "/proc/swaps": "Filename\tType\tSize\tUsed\tPriority\n",
    "/proc/sys/net/ipv4/ip_forward": "1\n",
    "/proc/sys/net/ipv6/conf/default/forwarding": "1\n",
    "/proc/sys/net/bridge/bridge-nf-call-iptables": "1\n",
    "/proc/net/tcp": "  sl  local_address rem_address   st\n"
                     "   0: 0100007F:0CEA 00000000:0000 0A\n",
    "/proc/net/tcp6": "  sl  local_address rem_address   st\n",
}


@dataclass
class JoinWorld:
    path: Path
    """PATH with the stand-in kubeadm and kubelet first."""
    world_path: Path
    endpoint: str
    """host:port of the workload cluster's API endpoint."""
    api: ApiServer
    """The workload cluster's API (an admin can read the Nodes there)."""


def _healthy_root(root: Path, hostname: str) -> socket.socket:
    """Make `root` a healthy node's: the /proc values kubeadm's preflight reads, its own
    host name (the name kubeadm gives a node whose configuration names none), and the
    container runtime's socket, listening (returned: the caller closes it)."""
    for path, text in {**HEALTHY_PROC, KERNEL_HOSTNAME: f"{hostname}\n"}.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (root / "var/run/containerd").mkdir(parents=True)
    runtime = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        runtime.bind(str(root / "var/run/containerd/containerd.sock"))
        runtime.listen(8)
    except OSError:
        runtime.close()
        raise
    return runtime


@contextlib.contextmanager
def joinable(root: Path, tools: Path, *, kubelet: bool = True,
             hostname: str = "worker-0") -> Iterator[JoinWorld]:
    """Prepare `root` as a healthy node and `tools` with the stand-in; sockets close after.
    With `kubelet`, a running kubelet turns the Node Ready once a CNI configuration is
    in place (as the sandbox's do); without, the test plays that part. `hostname` is the
    node's own host name.

    Keep `root` short: the runtime socket path must fit in sun_path (108 bytes)."""
    runtime = _healthy_root(root, hostname)
    api = ApiServer(tools / "workload-api", ipam=False).start()
    stop = threading.Event()

    def run_kubelet() -> None:
        posted: dict[str, str] = {}
        while not stop.wait(0.05):
            kubelet_sync(root, posted)

    running = threading.Thread(target=run_kubelet, name="kubelet", daemon=True)
    try:
        world = tools / "world.json"
        world.write_text(json.dumps({"version": "v1.31.2",
                                     "tokens": {"abcdef": "0123456789abcdef"},
                                     "caCertHash": CA_HASH,
                                     "apiServer": {"ca": str(api.ca_path),
                                                   "signerToken": api.admin_token}}))
        install(tools / "bin", root, world)
        if kubelet:
            running.start()
        yield JoinWorld(tools / "bin", world, f"127.0.0.1:{api.port}", api)
    finally:
        stop.set()
        if running.is_alive():
            running.join(timeout=5)
        runtime.close()
        api.stop()


@dataclass
class ClusterNode:
    root: Path
    path: Path
    """PATH with this node's stand-in kubeadm and kubelet first."""


@contextlib.contextmanager
def joinable_cluster(base: Path, names: tuple[str, ...]) -> Iterator[
        tuple[JoinWorld, dict[str, ClusterNode]]]:
    """Several healthy nodes (roots under `base`, one per name) and the one workload
    cluster they make together: one API stand-in, one world file (its etcd members, the
    tokens init created, the uploaded certificates), a kubelet per node."""
    tools = base / "t"
    tools.mkdir()
    api = ApiServer(tools / "workload-api", ipam=False).start()
    world = tools / "world.json"
    world.write_text(json.dumps({"version": "v1.31.2", "tokens": {},
                                 "apiServer": {"ca": str(api.ca_path),
                                               "signerToken": api.admin_token}}))
    stop = threading.Event()
    sockets: list[socket.socket] = []
    nodes: dict[str, ClusterNode] = {}
    for name in names:
        root = base / name
        sockets.append(_healthy_root(root, name))
        install(tools / name, root, world)
        nodes[name] = ClusterNode(root, tools / name)

    def run_kubelets() -> None:
        posted: dict[str, str] = {}
        while not stop.wait(0.05):
            for node in nodes.values():
                kubelet_sync(node.root, posted)

    kubelets = threading.Thread(target=run_kubelets, name="kubelets", daemon=True)
    kubelets.start()
    try:
        yield JoinWorld(tools, world, f"127.0.0.1:{api.port}", api), nodes
    finally:
        stop.set()
        kubelets.join(timeout=5)
        for runtime in sockets:
            runtime.close()
        api.stop()


def ca_pin(api: ApiServer) -> str:
    """The workload cluster's CA pin, as `kubeadm token create --print-join-command`
    prints it (sha256 of the CA's SubjectPublicKeyInfo)."""
    return spki_pin(api.ca_path.read_text())

