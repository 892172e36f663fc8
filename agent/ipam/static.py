"""The `static` IPAM plugin: pools written in the configuration, allocations kept on the node.

For sites without an IPAM server, for tests and for the demo. Allocations live in
/var/lib/machine-agent/ipam/static.json, written atomically under a lock, so a retry, a
reboot or a parallel claim for the same key gets the same address back.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from typing import Any

from agent.config import checks
from agent.config.fields import setting
from agent.ipam.base import (
    Allocation,
    ClaimRequest,
    PluginEnv,
    PoolExhausted,
    PoolNotFound,
    validate_allocation,
)
from agent.recordtype import record

STATE = "/var/lib/machine-agent/ipam/static.json"
LOCK = "/var/lib/machine-agent/ipam/static.lock"

IP = ipaddress.IPv4Address | ipaddress.IPv6Address


def _address_item(value: str) -> str | None:
    """An address, a range `first-last`, or a network."""
    if "-" in value:
        first, _, last = value.partition("-")
        return checks.ip_address(first) or checks.ip_address(last)
    if "/" in value:
        return checks.ip_network(value)
    return checks.ip_address(value)


@record(frozen=True)
class StaticPool:
    addresses: list[str] = setting(
        "Addresses to hand out: single addresses, ranges `first-last`, or networks.",
        check=_address_item)
    prefix: int = setting("Prefix length of the addresses handed out.")
    gateway: str | None = setting("Gateway; never handed out.", default=None,
                                  check=checks.ip_address)
    dns_servers: list[str] = setting("DNS servers handed out with each address.",
                                     factory=list, check=checks.ip_address)

    def validate(self) -> Iterator[tuple[str, str, str | None]]:
        versions = {ipaddress.ip_address(_first(a)).version for a in self.addresses}
        if len(versions) > 1:
            yield ("addresses", "mixes IPv4 and IPv6; make one pool per family", None)
        limit = 128 if versions == {6} else 32
        if not 0 < self.prefix <= limit:
            yield ("prefix", f"{self.prefix} is not a prefix length (1-{limit})", None)


@record(frozen=True)
class StaticOptions:
    pools: dict[str, StaticPool] = setting("Pools by name.", factory=dict)


def _first(item: str) -> str:
    return item.partition("-")[0].partition("/")[0]


def _candidates(pool: StaticPool) -> Iterator[IP]:
    for item in pool.addresses:
        if "-" in item:
            first, _, last = item.partition("-")
            lo, hi = int(ipaddress.ip_address(first)), int(ipaddress.ip_address(last))
            version = ipaddress.ip_address(first).version
            for number in range(lo, hi + 1):
                yield (ipaddress.IPv4Address(number) if version == 4
                       else ipaddress.IPv6Address(number))
        elif "/" in item:
            net = ipaddress.ip_network(item)
            yield from (net.hosts() if net.version == 4 and net.prefixlen < 31 else net)
        else:
            yield ipaddress.ip_address(item)


class StaticPlugin:
    name = "static"
    OPTIONS = StaticOptions

    def __init__(self, options: StaticOptions, env: PluginEnv) -> None:
        self.options = options
        self.host = env.host

    def claim(self, request: ClaimRequest) -> Allocation:
        pool = self.options.pools.get(request.pool)
        if pool is None:
            known = ", ".join(sorted(self.options.pools)) or "none"
            raise PoolNotFound(f"static: no pool named {request.pool!r} (pools: {known})")
        with self.host.lock(LOCK):
            state = self._load()
            held = state.get(request.claim_key)
            if held is not None and held["pool"] == request.pool:
                return self._allocation(pool, held["address"], request)
            used = {entry["address"] for key, entry in state.items()
                    if entry["pool"] == request.pool}
            address = self._first_free(pool, used, request)
            state[request.claim_key] = {"pool": request.pool, "address": address}
            alloc = self._allocation(pool, address, request)
            self._save(state)
            return alloc

    def release(self, allocation: Allocation) -> None:
        with self.host.lock(LOCK):
            state = self._load()
            if state.pop(allocation.handle, None) is not None:
                self._save(state)

    def _first_free(self, pool: StaticPool, used: set[str], request: ClaimRequest) -> str:
        want = 4 if request.family == "ipv4" else 6
        offered = 0
        for candidate in _candidates(pool):
            if candidate.version != want:
                raise PoolNotFound(f"static: pool {request.pool!r} has no {request.family} "
                                   "addresses")
            offered += 1
            text = str(candidate)
            if text not in used and text != pool.gateway:
                return text
        raise PoolExhausted(f"static: pool {request.pool!r} is exhausted "
                            f"({offered} addresses, all in use)")

    def _allocation(self, pool: StaticPool, address: str, request: ClaimRequest) -> Allocation:
        alloc = Allocation(address=address, prefix=pool.prefix, gateway=pool.gateway,
                           family=request.family, dns_servers=tuple(pool.dns_servers),
                           handle=request.claim_key, backend="static")
        return validate_allocation(alloc, request)

    def _load(self) -> dict[str, Any]:
        text = self.host.read_text(STATE)
        return dict(json.loads(text)["claims"]) if text else {}

    def _save(self, state: dict[str, Any]) -> None:
        self.host.write_file(STATE, json.dumps({"claims": state}, indent=1, sort_keys=True),
                             mode=0o600, dir_mode=0o700)
