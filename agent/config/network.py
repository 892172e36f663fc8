"""`spec.network`: interfaces, addresses, routes, DNS and host name."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from agent.config import checks
from agent.config.fields import setting

Problem = tuple[str, str, str | None]


@dataclass(frozen=True)
class IPAMRef:
    plugin: str = setting("IPAM plugin name (entry point in group machine_agent.ipam).",
                          check=checks.k8s_name)
    pool: str = setting("Pool in that backend.", check=checks.safe_text)
    family: Literal["ipv4", "ipv6"] = setting("Address family to claim.", default="ipv4")


@dataclass(frozen=True)
class AddressSpec:
    static: str | None = setting("Static address with prefix length, e.g. 192.0.2.10/24.",
                                 default=None, check=checks.ip_interface)
    ipam: IPAMRef | None = setting("Claim the address from an IPAM pool.", default=None)
    dhcp: Literal["ipv4", "ipv6"] | None = setting("Leave this family to DHCP.", default=None)

    def validate(self) -> Iterator[Problem]:
        given = [k for k in ("static", "ipam", "dhcp") if getattr(self, k) is not None]
        if len(given) != 1:
            yield ("", "give exactly one of static, ipam or dhcp", None)


@dataclass(frozen=True)
class InterfaceSpec:
    name: str = setting("Interface name on the node.", check=checks.interface_name)
    addresses: list[AddressSpec] = setting("Addresses of the interface.", factory=list)
    gateway: str | None = setting("Default gateway reached through this interface.",
                                  default=None, check=checks.ip_address)
    mtu: int | None = setting("MTU in bytes.", default=None)


@dataclass(frozen=True)
class NetworkSpec:
    renderer: Literal["networkd", "netplan", "none"] = setting(
        "Which persistent configuration to write; chosen by name, never probed.",
        default="networkd")
    interfaces: list[InterfaceSpec] = setting("Interfaces the agent configures.", factory=list)
    hostname: str | None = setting("Host name (FQDN) for /etc/hostname.", default=None,
                                   check=checks.fqdn)
