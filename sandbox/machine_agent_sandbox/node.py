"""A sandbox node: its root directory (what a healthy booted machine shows: /proc files,
a container runtime socket, `kubeadm` and `kubelet` on PATH), its AgentConfig and
management kubeconfig, and the agent run as a separate process with the node's view:
`ip netns exec NODE machine-agent --root ROOT --netns NODE run`."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from machine_agent_sandbox.chrony import Client
from machine_agent_sandbox.cleanup import Registry
from machine_agent_sandbox.cluster import POOL, Admin
from machine_agent_sandbox.files import write_atomic
from machine_agent_sandbox.kubeadm.hostname import KERNEL_HOSTNAME
from machine_agent_sandbox.kubeadm.kubelet_service import PIDFILE as KUBELET_PIDFILE
from machine_agent_sandbox.kubeadm_standin import install, install_release
from machine_agent_sandbox.netns import (
    DATA_LINK,
    GATEWAY,
    MANAGEMENT_ADDRESS,
    MANAGEMENT_PORT,
    static_address,
)
from machine_agent_sandbox.testkit.bootstrap import CA_HASH

HEALTHY_PROC = {
    "/proc/swaps": "Filename\tType\tSize\tUsed\tPriority\n",
    "/proc/sys/net/ipv4/ip_forward": "1\n",
    "/proc/sys/net/bridge/bridge-nf-call-iptables": "1\n",
    "/proc/net/tcp": "  sl  local_address rem_address   st\n",
    "/proc/net/tcp6": "  sl  local_address rem_address   st\n",
}
"""What kubeadm's preflight reads under the node root (the sandbox shares the host's
kernel, so the real /proc is not the node's)."""
RUNTIME_SOCKET = "/var/run/containerd/containerd.sock"
RUN_TIMEOUT = 90.0
RELEASE = "v1.31.2"
"""The Kubernetes release the sandbox's cluster and nodes run."""
STAGED_RELEASES = {"v1.31.3": False, "v1.31.4": True}
"""Releases the node carries for an in-place release change (spec.join.versionsDir), by
whether its kubelet is broken (built for another architecture: it does not run)."""
"""Bound on one agent run in the sandbox (the demo's own runs take seconds)."""


@dataclass(frozen=True)
class RestIPAM:
    """An IPAM server the nodes claim their data address from instead of the sandbox's
    pool (NetBox, Nautobot): the plugin, its settings (a pool named POOL for the sandbox's
    segment) and the token, written to the node at `token_file`."""

    plugin: str
    settings: dict[str, Any]
    token: str = field(repr=False)
    token_file: str


@dataclass
class Addressing:
    """How nodes get their data address: claimed from the sandbox's pool by an IPAM
    plugin (or from an IPAM server), or (while no plugin for the pool is installed)
    static per node."""

    plugin: str | None
    server: RestIPAM | None = None

    def settings(self, node: Node) -> dict[str, Any]:
        """The AgentConfig's spec.ipam for a node claiming from the IPAM server."""
        if self.server is None:
            return {}
        node.write(self.server.token_file, self.server.token + "\n", mode=0o600)
        return {"ipam": {"plugins": {self.server.plugin: self.server.settings}}}

    def address(self, index: int) -> dict[str, Any]:
        if self.plugin is None:
            return {"static": static_address(index)}
        return {"ipam": {"plugin": self.plugin, "pool": POOL}}

    @property
    def claims(self) -> tuple[tuple[str, str], ...]:
        """(interface, family) of the node's capi claims: what its RBAC names."""
        return ((DATA_LINK, "ipv4"),) if self.plugin == "capi" else ()


@dataclass
class Node:
    index: int
    netns: str
    home: Path
    workload: dict[str, Any] = field(default_factory=lambda: {
        "version": RELEASE, "tokens": {"abcdef": "0123456789abcdef"},
        "caCertHash": CA_HASH})
    """The kubeadm stand-in's world: the workload cluster as this node's kubeadm sees it
    (the sandbox adds `apiServer`, the workload API where its kubelet registers)."""
    claims: tuple[tuple[str, str], ...] = ()
    """(interface, family) of the addresses it claims with the capi plugin (its RBAC)."""

    @property
    def name(self) -> str:
        return f"demo-worker-{self.index}"

    @property
    def root(self) -> Path:
        return self.home / "root"

    @property
    def world(self) -> Path:
        return self.home / "world.json"

    @property
    def runtime_socket(self) -> Path:
        return self.root / RUNTIME_SOCKET.lstrip("/")

    def prepare(self, registry: Registry, admin: Admin, *, token: str,
                addressing: Addressing, extra: dict[str, Any] | None = None) -> None:
        """The node's root, its kubeadm stand-in, chrony client, AgentConfig and
        management kubeconfig: the sandbox's API endpoint, `admin`'s CA, and the server's
        name as `tls-server-name` when it is an external server reached through the
        relay."""
        self.claims = addressing.claims
        for path, text in HEALTHY_PROC.items():
            self.write(path, text)
        self.write(f"/{KERNEL_HOSTNAME}", f"{self.name}\n")  # its own, not the host's
        self.runtime_socket.parent.mkdir(parents=True, exist_ok=True)
        self.save_world()
        install(self.home / "bin", self.root, self.world)
        for release, broken in STAGED_RELEASES.items():
            install_release(self.root, self.world, release, broken=broken)
        self.write_guard()
        registry.pidfile(self.root / KUBELET_PIDFILE)  # its kubelet's healthz, once started
        chrony = Client(registry, self.home / "chrony", self.root)
        cluster = {"server": f"https://{MANAGEMENT_ADDRESS}:{MANAGEMENT_PORT}"}
        if admin.ca is not None:
            cluster["certificate-authority-data"] = base64.b64encode(
                admin.ca.read_bytes()).decode()
        if admin.external:
            cluster["tls-server-name"] = admin.tls_name
        self.write("/etc/machine-agent/management.kubeconfig", yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "node",
            "clusters": [{"name": "management", "cluster": cluster}],
            "users": [{"name": self.name, "user": {"token": token}}],
            "contexts": [{"name": "node", "context": {"cluster": "management",
                                                      "user": self.name}}]}), mode=0o600)
        spec: dict[str, Any] = {
            "identity": {"machine": {"namespace": admin.ns, "name": self.name}},
            "management": {"kubeconfig": "/etc/machine-agent/management.kubeconfig",
                           "requestTimeout": "5s", "bootstrapWait": "10s"},
            "network": {
                "hostname": f"{self.name}.demo.example.net",
                "interfaces": [{"name": DATA_LINK, "gateway": GATEWAY,
                                "addresses": [addressing.address(self.index)]}],
                # RFC 5227's probe timing takes ~5s; a sandbox segment answers at once.
                "conflictDetection": {"arpProbes": 2, "arpInterval": "100ms",
                                      "arpWait": "300ms"},
                "verify": {"timeout": "2s",
                           "managementEndpoint": f"{MANAGEMENT_ADDRESS}:{MANAGEMENT_PORT}"},
            },
            "time": chrony.time_settings(),
            "join": {"timeout": "30s", "retryDelay": "200ms",
                     "kubeletRestartCommand": [str(self.home / "bin/restart-kubelet")],
                     "kubeletRestartTimeout": "5s"},
            "retry": {"attempts": 2, "initialDelay": "200ms", "maxDelay": "500ms"},
            **addressing.settings(self),
            **(extra or {}),
        }
        self.write("/etc/machine-agent/config.yaml", yaml.safe_dump(
            {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig", "spec": spec},
            sort_keys=False), mode=0o600)

    def write_guard(self) -> None:
        """A `systemctl` first on the node's PATH that refuses: the sandbox's node has its
        own commands for what systemd would do (the kubelet's restart, chronyd's), and
        nothing the agent runs here may reach the host's services."""
        guard = self.home / "bin/systemctl"
        guard.write_text("#!/bin/sh\necho \"systemctl $*: refused in the sandbox (the host's "
                         "services are not the node's)\" >&2\nexit 1\n")
        guard.chmod(0o755)

    def save_world(self) -> None:
        write_atomic(self.world, json.dumps(self.workload))

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)

    # -- the agent ------------------------------------------------------------------------

    def agent(self, *args: str) -> list[str]:
        """The agent's command line with this node's view: its namespace, its root."""
        return ["ip", "netns", "exec", self.netns, sys.executable, "-m", "agent.cli",
                "--root", str(self.root), "--netns", self.netns, *args]

    def env(self) -> dict[str, str]:
        return {**os.environ, "PATH": f"{self.home / 'bin'}:{os.environ.get('PATH', '')}"}

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """`machine-agent run` (or `args`) on this node, its log on a pipe."""
        return subprocess.Popen(self.agent(*(args or ("run",))), env={**self.env(),
                                **(env or {})}, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                start_new_session=True)

    def run(self, *args: str, env: dict[str, str] | None = None,
            on_line: Callable[[str], None] = lambda line: None) -> tuple[int, list[str]]:
        """Run the agent to the end (bounded), passing each output line on as it comes."""
        proc = self.start(*args, env=env)
        lines = []
        try:
            for line in _lines(proc, time.monotonic() + RUN_TIMEOUT):
                lines.append(line)
                on_line(line)
            return proc.wait(timeout=5), lines
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)

    def status(self) -> dict[str, Any]:
        """`machine-agent status --json` of this node."""
        # Exits 1 or 2 for a failed or degraded outcome, as cloud-init status does.
        done = subprocess.run(self.agent("status", "--json"), capture_output=True, text=True,
                              timeout=30, env=self.env())
        if done.returncode not in (0, 1, 2):
            raise RuntimeError(f"machine-agent status --json: {done.stderr}")
        doc: dict[str, Any] = json.loads(done.stdout)
        return doc

    @property
    def joined(self) -> bool:
        return (self.root / "etc/kubernetes/kubelet.conf").exists()


def _lines(proc: subprocess.Popen[str], deadline: float) -> Iterator[str]:
    """The process's output lines as they come, until it closes its output or the
    deadline passes (a reader thread: a pipe read never blocks the deadline)."""
    import queue
    import threading

    assert proc.stdout is not None
    stream = proc.stdout
    lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def read() -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, name="agent-output", daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError(f"the agent did not finish within {RUN_TIMEOUT:g}s") from None
        if line is None:
            return
        yield line
