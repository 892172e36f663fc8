"""The IPAM plugin interface and the one normalized result every plugin returns.

A plugin is found by entry point (group `machine_agent.ipam`) and chosen by name in the
configuration, never by probing. Claims are idempotent by their claim key
(Machine UID + interface + family): a retry or a reboot gets the same address back.
"""

from __future__ import annotations

import ipaddress
import typing
from typing import Any, Literal, Protocol

from agent.config.fields import Decoder
from agent.errors import (
    AgentError,
    ConfigError,
    PermanentError,
    Reason,
    TemporaryError,
    shown,
)
from agent.host import Host
from agent.kube.facts import MachineFacts
from agent.recordtype import record

ENTRY_POINT_GROUP = "machine_agent.ipam"
"""Where IPAM plugins are registered (entry points); the name is the plugin's."""

Family = Literal["ipv4", "ipv6"]


@record(frozen=True)
class ClaimRequest:
    claim_key: str
    """Machine UID + interface + family; the backend keeps one address per key."""
    pool: str
    family: Family
    interface: str
    machine_namespace: str = ""
    machine_name: str = ""
    hostname: str = ""
    """The node's host name, for backends that record one (NetBox's dns_name)."""


@record(frozen=True)
class Allocation:
    address: str
    prefix: int
    gateway: str | None
    family: Family
    dns_servers: tuple[str, ...] = ()
    handle: str = ""
    """The backend's own reference, enough to release the address."""
    backend: str = ""

    @property
    def interface(self) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
        return ipaddress.ip_interface(f"{self.address}/{self.prefix}")


class IPAMPlugin(Protocol):
    """A backend. Each remote change it makes (an address created or deleted) is counted
    with `env.host.record_effect` right after it is made, as the shipped plugins do: the
    crash harness kills the agent there, before the journal knows of it."""

    name: str

    def claim(self, request: ClaimRequest) -> Allocation:
        """Claim (or find again) the address for `request.claim_key`."""

    def release(self, allocation: Allocation) -> None:
        """Give the address back; releasing twice is not an error."""


class InvalidAllocation(PermanentError):
    reason = Reason.InvalidAllocation


class PoolExhausted(PermanentError):
    reason = Reason.PoolExhausted


class PoolNotFound(PermanentError):
    reason = Reason.PoolNotFound


class AllocationFailed(PermanentError):
    """The provider says it could not allocate (not a full pool), and why."""

    reason = Reason.AllocationFailed


class IPAMUnauthorized(PermanentError):
    reason = Reason.IPAMUnauthorized


class IPAMUnavailable(TemporaryError):
    reason = Reason.IPAMUnavailable


@record(frozen=True)
class PluginEnv:
    """What a plugin may use besides its own settings."""

    host: Host
    machine: MachineFacts | None = None
    management: Any = None
    """The management-cluster client, for plugins that talk to it (capi)."""


class PluginFactory(Protocol):
    """What an entry point names: a class (or function) taking settings and env.

    `OPTIONS` is a dataclass of the plugin's settings, decoded from
    `spec.ipam.plugins.<name>` with the same validation as the rest of the config. An
    optional `check_pool(options, pool) -> str | None` refuses a pool name at config
    time (agent.ipam.settings.plugin_problems).
    """

    OPTIONS: type

    def __call__(self, options: Any, env: PluginEnv) -> IPAMPlugin: ...


def validate_allocation(alloc: Allocation, request: ClaimRequest) -> Allocation:
    """Refuse an answer that cannot be used, naming the backend and what is wrong."""
    problems: list[str] = []
    texts = [("address", alloc.address), ("gateway", alloc.gateway or ""),
             *(("DNS server", d) for d in alloc.dns_servers)]
    for what, text in texts:
        if not isinstance(text, str):
            raise InvalidAllocation(f"{alloc.backend}: the {what} is {shown(repr(text))}, "
                                    "not a string")
        if "%" in text:  # Python takes anything after it, newlines included
            raise InvalidAllocation(f"{alloc.backend}: the {what} {shown(text)} has an "
                                    "IPv6 scope id, which an IPAM answer never needs")
    if not isinstance(alloc.prefix, int) or isinstance(alloc.prefix, bool):
        raise InvalidAllocation(f"{alloc.backend}: the prefix is {shown(repr(alloc.prefix))}, "
                                "not a number")
    try:
        iface = alloc.interface
    except ValueError as err:
        raise InvalidAllocation(f"{alloc.backend}: unusable address: "
                                f"{shown(str(err), 120)}") from None
    version = 4 if request.family == "ipv4" else 6
    if iface.version != version:
        problems.append(f"asked for {request.family}, got {alloc.address}")
    addr, net = iface.ip, iface.network
    if addr.is_link_local or addr.is_loopback or addr.is_multicast or addr.is_unspecified:
        problems.append(f"{addr} is not a usable host address")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        problems.append(f"{addr} is an IPv4-mapped IPv6 address")
    if net.prefixlen == 0:
        problems.append("prefix /0 would put every address on the link")
    if iface.version == 4 and net.prefixlen < 31 and addr in (net.network_address,
                                                               net.broadcast_address):
        problems.append(f"{addr} is the network or broadcast address of {net}")
    if alloc.gateway is not None:
        try:
            gw = ipaddress.ip_address(alloc.gateway)
        except ValueError:
            problems.append(f"gateway {alloc.gateway!r} is not an address")
        else:
            if gw not in net:
                problems.append(f"gateway {gw} is outside {net}")
            if gw == addr:
                problems.append(f"gateway {gw} equals the address")
    for dns in alloc.dns_servers:
        try:
            ipaddress.ip_address(dns)
        except ValueError:
            problems.append(f"DNS server {dns!r} is not an address")
    if problems:
        raise InvalidAllocation(f"{alloc.backend} answered {alloc.address}/{alloc.prefix}: "
                                + "; ".join(problems))
    return alloc


def open_plugin(name: str, settings: dict[str, dict[str, Any]], env: PluginEnv) -> IPAMPlugin:
    """Load the plugin named `name` and hand it its checked settings."""
    factory = typing.cast(PluginFactory, load_plugin_factory(name))
    decoder = Decoder()
    options = decoder.decode(factory.OPTIONS, settings.get(name, {}),
                             f"spec.ipam.plugins.{name}")
    if decoder.errors:
        raise ConfigError(decoder.errors)
    return factory(options, env)


def load_plugin_factory(name: str) -> object:
    """The entry point registered under `name`; the error lists the installed ones."""
    from agent.entrypoints import entry_points

    found = {ep.name: ep for ep in entry_points(ENTRY_POINT_GROUP)}
    if name not in found:
        raise PermanentError(
            f"no IPAM plugin named {name!r}",
            reason=Reason.PoolNotFound,
            hint=f"installed plugins: {', '.join(sorted(found)) or 'none'}")
    try:
        return found[name].load()
    except Exception as err:  # a third-party plugin that fails to import
        raise AgentError(f"IPAM plugin {name!r} failed to load: {err}") from err
