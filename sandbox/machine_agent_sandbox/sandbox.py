"""The whole sandbox, brought up and torn down as one: namespaces and wires, the NTP
server, the management API stand-in with its objects, a second stand-in as the workload
cluster's API, the runtime sockets and kubelets (machine_agent_sandbox/endpoints.py), the nodes.
`Sandbox.up()` is a context manager: on the way out everything recorded is undone (also
on Ctrl-C or a failure), unless the sandbox is kept for inspection.

`Sandbox.up(external=KUBECONFIG)` uses an external API server in place of the stand-in
(the e2e suite's MACHINE_AGENT_TEST_KUBECONFIG; see machine_agent_sandbox.external).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from importlib.metadata import entry_points
from pathlib import Path
from urllib.parse import urlsplit

from agent.config.cni import CNISpec
from agent.errors import PermanentError
from agent.ipam.base import ENTRY_POINT_GROUP
from machine_agent_sandbox.chrony import start_server
from machine_agent_sandbox.cleanup import Registry, leftovers
from machine_agent_sandbox.cluster import (
    POOL_RANGE,
    Admin,
    seed_cluster,
    seed_machine,
    start_standin,
    start_workload,
)
from machine_agent_sandbox.external import connect, start_relay
from machine_agent_sandbox.netns import WORKLOAD_ADDRESS, WORKLOAD_PORT, Network
from machine_agent_sandbox.node import Addressing, Node, RestIPAM

IPAM_PLUGIN = "capi"
"""The IPAM plugin that claims from the stand-in's InClusterIPPool."""
CNI_PLUGINS = Path("/usr/lib/cni")
"""Where Debian's containernetworking-plugins put the real plugins."""
START_WAIT = 10.0


def install_cni_plugins(bin_dir: Path) -> None:
    """The real plugins in a node root's `bin_dir`: hard links (copies across file
    systems), never symbolic links, which the agent resolves inside the node's root as
    the booted node would (an absolute link to /usr/lib/cni would name the root's own)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for plugin in CNI_PLUGINS.iterdir():
        try:
            os.link(plugin, bin_dir / plugin.name)
        except OSError:  # another file system, or links not allowed: a copy
            shutil.copy2(plugin, bin_dir / plugin.name)


def _relay_ipam(registry: Registry, node: Node, ipam: RestIPAM) -> None:
    """An IPAM server on the machine's loopback (the tests' NetBox, Nautobot) at the same
    address on the node's loopback, where the agent, run in the node's namespace,
    reaches it."""
    server = urlsplit(str(ipam.settings.get("url", "")))
    if server.hostname in ("127.0.0.1", "localhost") and server.port:
        address = f"127.0.0.1:{server.port}"
        start_relay(registry, f"ipam-{node.index}", node.netns, address, address,
                    f"the IPAM server {ipam.settings['url']}")


@dataclass
class Features:
    """What this installation lets the sandbox show; each missing piece is said."""

    ipam: bool
    cni_phase: bool
    cni_plugins: bool

    @classmethod
    def detect(cls) -> Features:
        plugins = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
        return cls(ipam=IPAM_PLUGIN in plugins,
                   cni_phase="conflist" in {f.name for f in fields(CNISpec)},
                   cni_plugins=(CNI_PLUGINS / "bridge").exists())

    def notes(self) -> list[str]:
        out = []
        if not self.ipam:
            out.append(f"addresses are STATIC per node: the IPAM plugin {IPAM_PLUGIN!r} "
                       "(claims from the InClusterIPPool) is not installed in this build")
        if not self.cni_phase:
            out.append("the cni phase is empty in this build: no CNI check is shown")
        elif not self.cni_plugins:
            out.append(f"the real CNI plugins are NOT installed ({CNI_PLUGINS}: apt-get "
                       "install containernetworking-plugins); the CNI check is skipped")
        return out


@dataclass
class Sandbox:
    registry: Registry
    network: Network
    admin: Admin
    workload: Admin
    """The workload cluster's API, where the nodes' kubelets register their Nodes."""
    ntp: subprocess.Popen[bytes]
    features: Features
    nodes: list[Node] = field(default_factory=list)
    external_kubeconfig: Path | None = None
    """The admin kubeconfig of the external management API server, if one is used."""

    @classmethod
    @contextlib.contextmanager
    def up(cls, nodes: int = 1, *, keep: bool = False,
           progress: Callable[[str], None] = lambda message: None,
           external: Path | None = None, ipam: RestIPAM | None = None) -> Iterator[Sandbox]:
        """A running sandbox with `nodes` nodes ready for the agent; its management API is
        the stand-in, or the server the admin kubeconfig `external` names; the nodes'
        addresses come from the sandbox's pool, or from the IPAM server `ipam`."""
        if shutil.which("ip") is None or shutil.which("chronyd") is None:
            raise PermanentError("the sandbox needs `ip` (iproute2) and `chronyd` (chrony)",
                                 hint="apt-get install iproute2 chrony")
        for stale in leftovers():
            if not stale.record.kept:
                stale.undo()  # left by a demo that was killed
        registry = Registry.create()
        kept = False
        try:
            box = cls._bring_up(registry, nodes, progress, external, ipam)
            yield box
            kept = keep
        finally:
            if kept:
                registry.keep()
            else:
                registry.undo()

    @classmethod
    def _bring_up(cls, registry: Registry, count: int, progress: Callable[[str], None],
                  external: Path | None, ipam: RestIPAM | None) -> Sandbox:
        features = Features.detect()
        network = Network.create(registry)
        progress(f"namespaces: router {network.router} (gateway, management API, NTP, "
                 "workload API)")
        ntp = start_server(registry, network.router)
        if external is None:
            admin = start_standin(registry, network.router)
            progress("management API stand-in: https://198.51.100.1:6443 (real Cluster API "
                     "and IPAM CRDs, pool controller running)")
        else:
            admin = connect(registry, network.router, external)
            progress(f"management API: https://{admin.host}:{admin.port} (external, "
                     f"namespace {admin.ns}), relayed at https://198.51.100.1:6443; the "
                     "pool controller runs here as its client")
        workload = start_workload(registry, network.router)
        progress(f"workload API stand-in: https://{WORKLOAD_ADDRESS}:{WORKLOAD_PORT} (the "
                 "kubelets register their Nodes there)")
        seed_cluster(admin, pool=[POOL_RANGE])
        box = cls(registry, network, admin, workload, ntp, features,
                  external_kubeconfig=external)
        addressing = (Addressing(ipam.plugin, ipam) if ipam is not None else
                      Addressing(IPAM_PLUGIN if features.ipam else None))
        for index in range(count):
            node = Node(index, network.add_node(index), registry.base / f"n{index}")
            node.workload["apiServer"] = {"ca": str(workload.ca),
                                          "signerToken": workload.token}
            token = seed_machine(admin, node.name, f"{WORKLOAD_ADDRESS}:{WORKLOAD_PORT}",
                                 ipam_claims=addressing.claims)
            node.prepare(registry, admin, token=token, addressing=addressing,
                         extra=box._cni_settings(node))
            if ipam is not None:
                _relay_ipam(registry, node, ipam)
            box.nodes.append(node)
        progress(f"{count} node namespace(s), each with a Machine (readiness gate "
                 "NodeBootstrapped), a CABPK bootstrap Secret and its own token")
        box._start_endpoints()
        return box

    def _cni_settings(self, node: Node) -> dict[str, object]:
        """spec.cni: the real plugins, linked into the node's bin dir, and a bridge list
        proved with ADD/CHECK/DEL."""
        if not (self.features.cni_phase and self.features.cni_plugins):
            return {}
        install_cni_plugins(node.root / "opt/cni/bin")
        return {"cni": {"conflist": {"template": "bridge",
                                     "values": {"subnet": "203.0.113.128/25"}}}}

    def _start_endpoints(self) -> None:
        argv = ["ip", "netns", "exec", self.network.router, sys.executable, "-m",
                "machine_agent_sandbox.endpoints"]
        for node in self.nodes:
            argv += ["--unix", str(node.runtime_socket), "--kubelet", str(node.root)]
        log = self.registry.base / "endpoints.log"
        self.registry.spawn(argv, log)
        deadline = time.monotonic() + START_WAIT
        while "ready" not in (log.read_text() if log.exists() else ""):
            if time.monotonic() > deadline:
                raise PermanentError(f"the sandbox's endpoints did not start: "
                                     f"{log.read_text()[-500:]}")
            time.sleep(0.05)

    @property
    def external(self) -> bool:
        """Whether the management API is an external server (not the stand-in)."""
        return self.admin.external

    def kubectl(self) -> list[str]:
        """`kubectl` as the management cluster's administrator: in the router namespace
        with the stand-in's admin kubeconfig, or here with the external server's."""
        if self.external_kubeconfig is not None:
            return ["kubectl", "--kubeconfig", str(self.external_kubeconfig)]
        return ["ip", "netns", "exec", self.network.router, "kubectl", "--kubeconfig",
                str(self.registry.base / "apiserver/admin.kubeconfig")]

    def stop_ntp(self) -> None:
        self.registry.stop(self.ntp)

    def conditions(self, node: Node) -> dict[str, dict[str, str]]:
        machine = self.admin.machine(node.name)
        return {c["type"]: c for c in machine.get("status", {}).get("conditions", [])}
