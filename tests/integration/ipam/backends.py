"""The IPAM backends the conformance suite runs against, behind one small harness.

Each harness builds a plugin as the agent would (through its entry point and checked
settings), names pools for the cases, and, where the backend can show them, makes a
plugin with bad credentials and takes the backend away for a while.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from machine_agent_sandbox.testkit.faultproxy import FaultProxy

from agent.host import Host
from agent.ipam.base import IPAMPlugin, PluginEnv, open_plugin
from agent.ipam.nautobot import CLAIM_FIELD as NAUTOBOT_CLAIM_FIELD
from agent.ipam.netbox import CLAIM_FIELD
from tests.integration.ipam.conftest import Management, NetBox
from tests.integration.ipam.tcpproxy import TCPProxy
from tests.integration.nautobot.world import Nautobot

TOKEN_FILE = "/etc/machine-agent/netbox.token"
NAUTOBOT_TOKEN_FILE = "/etc/machine-agent/nautobot.token"


@dataclass
class Harness:
    name: str
    settings: dict[str, Any]
    env: PluginEnv
    pools: dict[str, str]
    """Case → pool name: `v4`, `v6` (at least 20 free addresses), `small` (`small_size`)."""
    small_size: int = 3
    bad_credentials: Callable[[], IPAMPlugin] | None = None
    outage: Callable[[], contextlib.AbstractContextManager[None]] | None = None
    slow: Callable[[float], contextlib.AbstractContextManager[None]] | None = None
    """Every answer of the backend takes this many seconds longer."""
    impatient: Callable[[], IPAMPlugin] | None = None
    """A plugin whose requests time out after `patience` seconds."""
    patience: float = 0.5
    held: Callable[[], int] | None = None
    """How many addresses (or claims) the backend holds for claims (not gateways)."""
    cleanup: list[Callable[[], None]] = field(default_factory=list)

    def plugin(self) -> IPAMPlugin:
        return open_plugin(self.name, {self.name: self.settings}, self.env)

    def down(self) -> contextlib.AbstractContextManager[None]:
        assert self.outage is not None
        return self.outage()


def static_harness(tmp_path: Path) -> Harness:
    settings = {"pools": {
        "v4": {"addresses": ["192.0.2.0/24"], "prefix": 24, "gateway": "192.0.2.1",
               "dnsServers": ["192.0.2.53"]},
        "v6": {"addresses": ["2001:db8:10::100-2001:db8:10::1ff"], "prefix": 64,
               "gateway": "2001:db8:10::1"},
        "small": {"addresses": ["198.51.100.1-198.51.100.4"], "prefix": 28,
                  "gateway": "198.51.100.1"},
    }}
    return Harness("static", settings, PluginEnv(Host(tmp_path)),
                   {"v4": "v4", "v6": "v6", "small": "small"})


def netbox_settings(url: str) -> dict[str, Any]:
    return {"url": url, "tokenFile": TOKEN_FILE, "timeout": "30s", "pools": {
        "v4": {"prefix": "192.0.2.0/24"}, "small": {"prefix": "198.51.100.0/28"},
        "range": {"ipRange": "203.0.113.10"}}}


def _rest_harness(name: str, tmp_path: Path, url: str, token: str, token_file: str,
                  bad_token: str, pools: dict[str, Any], held: Callable[[], int]) -> Harness:
    """A REST IPAM server (NetBox, Nautobot) reached through a TCP proxy that the outage
    case stops and starts and the slow case delays. Pool `v6` is named by its prefix (no
    entry needed); `small` offers 13 addresses (.2-.14: network, broadcast and the gateway
    .1 are never handed out)."""
    host = Host(tmp_path)
    host.write_file(token_file, token + "\n", mode=0o600)
    target = url.removeprefix("http://").rsplit(":", 1)
    proxy = TCPProxy((target[0], int(target[1]))).start()
    settings = {"url": proxy.url, "tokenFile": token_file, "timeout": "30s", "pools": pools}
    harness = Harness(name, settings, PluginEnv(host),
                      {"v4": "v4", "v6": "2001:db8:10::/64", "small": "small"}, small_size=13)

    def bad_credentials() -> IPAMPlugin:
        Host(tmp_path / "bad").write_file(token_file, bad_token + "\n")
        return open_plugin(name, {name: settings}, PluginEnv(Host(tmp_path / "bad")))

    @contextlib.contextmanager
    def outage() -> Iterator[None]:
        proxy.stop()
        try:
            yield
        finally:
            proxy.start()

    @contextlib.contextmanager
    def slow(seconds: float) -> Iterator[None]:
        proxy.delay = seconds
        try:
            yield
        finally:
            proxy.delay = 0.0

    def impatient() -> IPAMPlugin:
        return open_plugin(name, {name: {**settings, "timeout": f"{harness.patience:g}s"}},
                           PluginEnv(host))

    harness.bad_credentials, harness.outage, harness.slow = bad_credentials, outage, slow
    # A real server on 2 busy cores takes up to half a second to answer a POST.
    harness.impatient, harness.held, harness.patience = impatient, held, 1.0
    harness.cleanup.append(proxy.stop)
    return harness


def netbox_harness(tmp_path: Path, netbox: NetBox) -> Harness:
    """The real NetBox; pool `range` is an IP range."""
    def held() -> int:
        keys = [(r.get("custom_fields") or {}).get(CLAIM_FIELD) for r in netbox.addresses()]
        return sum(1 for k in keys if k and not k.startswith("machine-agent/gateway/"))

    return _rest_harness("netbox", tmp_path, netbox.url, netbox.token, TOKEN_FILE,
                         "nbt_machineagent.WrongSecret",
                         netbox_settings(netbox.url)["pools"], held)


def nautobot_harness(tmp_path: Path, nautobot: Nautobot) -> Harness:
    """The real Nautobot (the plugin reserves the gateway itself)."""
    def held() -> int:
        return sum(1 for r in nautobot.addresses()
                   if (r.get("custom_fields") or {}).get(NAUTOBOT_CLAIM_FIELD))

    return _rest_harness("nautobot", tmp_path, nautobot.url, nautobot.token,
                         NAUTOBOT_TOKEN_FILE, "0" * 40,
                         {"v4": {"prefix": "192.0.2.0/24"},
                          "small": {"prefix": "198.51.100.0/28"}}, held)


def capi_harness(tmp_path: Path, world: Management) -> Harness:
    """IPAddressClaims in the management cluster; the stand-in's pool controller (or the
    test, against a real server) plays the in-cluster provider. The plugin reaches the
    server through the fault proxy (testkit/faultproxy.py), which takes the backend away
    (500 on every claim request) or slows it, against either server."""
    v4 = world.pool("v4", ["192.0.2.0/24"], 24, gateway="192.0.2.1")
    v6 = world.pool("v6", ["2001:db8:10::100-2001:db8:10::1ff"], 64, gateway="2001:db8:10::1",
                    kind="GlobalInClusterIPPool")
    small = world.pool("small", ["198.51.100.2-198.51.100.4"], 28, gateway="198.51.100.1")
    settings = {"timeout": "20s", "pools": {
        "v4": {"name": v4}, "small": {"name": small},
        "v6": {"name": v6, "kind": "GlobalInClusterIPPool"}}}
    admin = world.admin
    proxy = FaultProxy(admin.server, admin.verify, tmp_path / "proxy", admin.cert).start()
    host = Host(tmp_path)
    harness = Harness("capi", settings,
                      PluginEnv(host, world.machine, world.client_with(world.token, via=proxy)),
                      {"v4": "v4", "v6": "v6", "small": "small"}, small_size=3)
    harness.cleanup.append(proxy.stop)

    def bad_credentials() -> IPAMPlugin:
        return open_plugin("capi", {"capi": settings},
                           PluginEnv(host, world.machine, world.client_with("not-a-token")))

    @contextlib.contextmanager
    def outage() -> Iterator[None]:
        fault = proxy.faults.add("500", path="ipaddressclaims")
        try:
            yield
        finally:
            proxy.faults.clear(fault)

    @contextlib.contextmanager
    def slow(seconds: float) -> Iterator[None]:
        fault = proxy.faults.add("latency", path="ipaddress", seconds=seconds)
        try:
            yield
        finally:
            proxy.faults.clear(fault)

    def impatient() -> IPAMPlugin:
        """The plugin on a management client whose request time-out is `patience`
        (spec.management.requestTimeout)."""
        return open_plugin("capi", {"capi": settings}, PluginEnv(
            host, world.machine, world.client_with(world.token, timeout=harness.patience,
                                                   via=proxy)))

    harness.bad_credentials, harness.outage, harness.slow = bad_credentials, outage, slow
    harness.impatient, harness.held = impatient, lambda: len(world.claims())
    return harness
