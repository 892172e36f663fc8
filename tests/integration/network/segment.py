"""A network segment of real namespaces for the network phase's tests: a "node"
namespace joined by a veth pair to a "router" namespace holding the gateway and, when
asked, a TCP listener standing for the management API. Names are unique; everything is
deleted afterwards, even when a test fails."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.config import AgentConfig
from agent.config.fields import Decoder
from agent.errors import ConfigError
from agent.host import Host
from agent.phases.base import PhaseContext
from agent.phases.network import NetworkPhase
from agent.phases.network.result import NetworkResult
from agent.state import Journal

GATEWAY, GATEWAY6 = "192.0.2.1", "2001:db8::1"
MANAGEMENT = f"{GATEWAY}:6443"
FAST = {"arpProbes": 2, "arpInterval": "100ms", "arpWait": "300ms", "dadTimeout": "4s"}
"""Conflict detection shortened for tests (the defaults follow RFC 5227: ~5s)."""


def ip(*args: str) -> str:
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True,
                          timeout=30).stdout


@dataclass
class Segment:
    node: str
    router: str
    listeners: list[socket.socket] = field(default_factory=list)

    def router_ip(self, *args: str) -> str:
        return ip("-n", self.router, *args)

    def node_ip(self, *args: str) -> str:
        return ip("-n", self.node, *args)

    def listen(self, address: str = GATEWAY, port: int = 6443) -> None:
        """A TCP listener in the router namespace: the kernel completes the handshake
        from its backlog, so no thread needs to accept."""
        from pyroute2 import netns

        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = netns.create_socket(self.router, family, socket.SOCK_STREAM, flags=0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(16)
        self.listeners.append(sock)

    def up_and_settled(self, link: str) -> None:
        """Set a node link up and wait (bounded) until its IPv6 link-local address has
        passed DAD, so a snapshot taken next is not racing the kernel."""
        self.node_ip("link", "set", link, "up")
        for _ in range(50):
            shown = self.node_ip("-6", "addr", "show", link)
            if "fe80::" in shown and "tentative" not in shown:
                return
            time.sleep(0.1)
        raise AssertionError(f"{link} has no usable link-local address after 5s")

    def state(self) -> dict[str, Any]:
        """The node namespace as `ip -j` shows it: links, addresses, routes (all tables
        but the kernel's local one) — independent of the agent's own reading."""
        links = {link["ifname"]: (link.get("mtu"), "UP" in link.get("flags", []),
                                  link.get("master"), link.get("link_type"))
                 for link in json.loads(self.node_ip("-j", "-d", "link", "show"))}
        addrs = sorted((a["ifname"], i["local"], i["prefixlen"])
                       for a in json.loads(self.node_ip("-j", "addr", "show"))
                       for i in a.get("addr_info", []))
        routes = sorted(json.dumps({k: r.get(k) for k in ("dst", "gateway", "dev", "table",
                                                          "metric", "protocol", "scope")},
                                   sort_keys=True)
                        for family in ("-4", "-6")
                        for r in json.loads(self.node_ip(family, "-j", "route", "show",
                                                         "table", "all"))
                        if r.get("table") != "local" and r.get("type") != "multicast")
        return {"links": links, "addresses": addrs, "routes": routes}


@contextmanager
def segment() -> Iterator[Segment]:
    tag = uuid.uuid4().hex[:8]
    seg = Segment(f"ma-node-{tag}", f"ma-rtr-{tag}")
    ip("netns", "add", seg.node)
    try:
        ip("netns", "add", seg.router)
        seg.node_ip("link", "add", "n0", "type", "veth", "peer", "name", "r0", "netns",
                    seg.router)
        seg.router_ip("link", "set", "lo", "up")
        seg.router_ip("link", "set", "r0", "up")
        seg.router_ip("addr", "add", f"{GATEWAY}/24", "dev", "r0")
        seg.router_ip("addr", "add", f"{GATEWAY6}/64", "dev", "r0", "nodad")
        seg.node_ip("link", "set", "lo", "up")
        yield seg
    finally:
        for sock in seg.listeners:
            sock.close()
        for name in (seg.node, seg.router):
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True,
                           timeout=30)


def config(network: dict[str, Any], *, endpoint: str | None = MANAGEMENT,
           timeout: str = "3s") -> AgentConfig:
    network = {"conflictDetection": FAST, **network}
    network.setdefault("verify", {"timeout": timeout, **(
        {"managementEndpoint": endpoint} if endpoint else {})})
    doc = {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
           "spec": {"network": network}}
    decoder = Decoder()
    cfg = decoder.decode_object(AgentConfig, doc, "")
    if decoder.errors:
        raise ConfigError(decoder.errors)
    assert isinstance(cfg, AgentConfig)
    return cfg


@dataclass
class Run:
    host: Host
    result: NetworkResult
    effects: int
    """Side effects of this run on the node (netlink changes, files), journal aside."""


def run_phase(root: Path, seg: Segment, cfg: AgentConfig,
              between: Callable[[], object] | None = None,
              after_apply: Callable[[], object] | None = None) -> Run:
    """Plan, apply and verify the network phase in the node namespace, as the
    orchestrator does (without its retries); `between` runs after the plan,
    `after_apply` before verify."""
    host = Host(root, netns=seg.node)
    journal = Journal.load(host)
    journal.start("network", "test")
    log = logging.getLogger("test.network")

    def context(h: Host) -> PhaseContext:
        return PhaseContext(cfg, h, journal, {}, lambda message: log.info(message), log)

    phase = NetworkPhase()
    plan = phase.plan(context(host.read_only_view()))
    if between is not None:
        between()
    start = len(host.effects.recent)
    phase.apply(context(host), plan)
    if after_apply is not None:
        after_apply()
    result = phase.verify(context(host), plan)
    changes = [e for e in host.effects.recent[start:]
               if not e.startswith("write /var/lib/machine-agent/")]  # the journal itself
    return Run(host, result, len(changes))


def holds(root: Path, seg: Segment, cfg: AgentConfig, run: Run) -> bool:
    """Whether the orchestrator would find the phase up to date after `run` (its inputs
    unchanged): the phase's still_holds, asked on the read-only view as it asks it."""
    host = Host(root, netns=seg.node).read_only_view()
    log = logging.getLogger("test.network")
    ctx = PhaseContext(cfg, host, Journal.load(host), {}, lambda message: log.info(message),
                       log)
    return NetworkPhase().still_holds(ctx, run.result)
