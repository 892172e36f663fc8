"""The `nautobot` IPAM plugin: addresses from Nautobot's REST API (Nautobot 3.2).

What it relies on was measured against Nautobot 3.2.7 (tests/integration/nautobot/README.md):
- `POST /api/ipam/prefixes/{id}/available-ips/` allocates the next free address (201) and
  answers 204 with no body when the prefix is full. Unlike NetBox it takes no lock: ten
  parallel allocations in one prefix gave seven 400s ("IP address ... already exists"),
  never a duplicate (the database refuses it; under more load that refusal is a 500). Such
  an answer is a lost race: the plugin allocates again, a bounded number of times.
- Custom fields cannot be made unique in Nautobot, so one claim key could end up on two
  addresses (two runs of one node at once, or a crash between allocation and journal).
  Each address carries the claim key in the custom field `machine_agent_claim_key`
  (filter logic `exact`); after allocating, the plugin reads every address with its key
  back, and the oldest (then the smallest id) is the claim's; a younger one is deleted by
  whoever finds it. So a key settles on one address, whichever run looks.
- Nautobot has no gateway field and hands the gateway out like any address: the prefix's
  custom field `gateway` (else an address in it tagged `gateway`) names it, and before
  allocating from a prefix that holds its gateway the plugin makes sure an address exists
  for it (created `Reserved`; a 400 "already exists" means another agent did it).
- Every look-up checks its results itself (a filter Nautobot does not know is ignored).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from agent.config import checks
from agent.config.fields import Duration, setting
from agent.errors import AgentError, shown
from agent.ipam.base import (
    Allocation,
    ClaimRequest,
    InvalidAllocation,
    IPAMUnavailable,
    PluginEnv,
    PoolExhausted,
    PoolNotFound,
    validate_allocation,
)
from agent.ipam.rest import RestAPI, detail, loopback_or_https
from agent.recordtype import record

CLAIM_FIELD = "machine_agent_claim_key"
GATEWAY_FIELD = "gateway"
GATEWAY_TAG = "gateway"
RACE_ATTEMPTS = 10
"""Allocations that lost a race to a parallel one before the plugin gives up (temporary)."""

IP = ipaddress.IPv4Address | ipaddress.IPv6Address


def _namespace(value: str) -> str | None:
    return checks.safe_text(value) or (None if value.strip() else "a namespace has a name")


@record(frozen=True)
class NautobotPool:
    prefix: str = setting("Allocate from this Nautobot prefix (e.g. 192.0.2.0/24).",
                          check=checks.ip_network)


@record(frozen=True)
class NautobotOptions:
    url: str = setting("Nautobot base URL, e.g. https://nautobot.example.net.",
                       check=loopback_or_https)
    token_file: str = setting("File holding the API token (40 hexadecimal characters).",
                              check=checks.absolute_path)
    ca_file: str | None = setting("CA bundle for Nautobot's certificate; system CAs if unset.",
                                  default=None, check=checks.absolute_path)
    namespace: str = setting("The IPAM namespace the prefixes are in.", default="Global",
                             check=_namespace)
    timeout: Duration = setting("Time-out of one request.", default=Duration(10),
                                check=checks.positive)
    pools: dict[str, NautobotPool] = setting(
        "Pools by name. A pool name that is itself a prefix (2001:db8:10::/64) needs no entry.",
        factory=dict)


@record(frozen=True)
class Prefix:
    id: str
    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    gateway: IP | None


class NautobotPlugin:
    name = "nautobot"
    OPTIONS = NautobotOptions

    def __init__(self, options: NautobotOptions, env: PluginEnv) -> None:
        self.options = options
        self.host = env.host
        self.base = options.url.rstrip("/")
        self.api = RestAPI.with_token_file(
            "nautobot", "Nautobot", self.base, options.token_file, scheme=lambda _: "Token",
            ca_file=options.ca_file, timeout=float(options.timeout), host=env.host)

    # -- the interface ----------------------------------------------------------------

    def claim(self, request: ClaimRequest) -> Allocation:
        """The address for the claim key; a malformed answer is InvalidAllocation naming
        the field."""
        try:
            prefix = self._prefix(request)
            row = self._settled(request.claim_key) or self._allocate(request, prefix)
            address = ipaddress.ip_interface(self.api.text(row, "address", "address"))
        except (ValueError, TypeError) as err:
            raise InvalidAllocation(f"nautobot {self.base}: unusable answer: "
                                    f"{shown(str(err), 200)}") from None
        if address.ip not in prefix.network:
            raise InvalidAllocation(
                f"nautobot: claim key {request.claim_key!r} already holds {address}, which "
                f"is outside pool {request.pool!r} (prefix {prefix.network})",
                hint="release it first (machine-agent release-addresses) or delete "
                     "that address in Nautobot")
        return validate_allocation(Allocation(
            address=str(address.ip), prefix=address.network.prefixlen,
            gateway=str(prefix.gateway) if prefix.gateway is not None else None,
            family=request.family, handle=self.api.text(row, "id", "address"),
            backend=f"nautobot {self.base}"), request)

    def release(self, allocation: Allocation) -> None:
        handle = checked_id(allocation.handle)
        response = self.api.call("DELETE", f"/api/ipam/ip-addresses/{handle}/", ok=(204, 404))
        if response.status_code == 204:
            self.host.record_effect(f"delete Nautobot IP address {allocation.address} "
                                    f"(id {handle})")

    # -- Nautobot ----------------------------------------------------------------------

    def _settled(self, key: str) -> dict[str, Any] | None:
        """The claim key's address: the oldest of those carrying it; younger ones (a race
        or a crash left them) are deleted."""
        rows = [r for r in self.api.results("/api/ipam/ip-addresses/",
                                            {f"cf_{CLAIM_FIELD}": key})
                if (r.get("custom_fields") or {}).get(CLAIM_FIELD) == key]
        if not rows:
            return None
        rows.sort(key=lambda r: (str(r.get("created") or ""),
                                 self.api.text(r, "id", "address")))
        for extra in rows[1:]:
            handle = checked_id(self.api.text(extra, "id", "address"))
            if self.api.call("DELETE", f"/api/ipam/ip-addresses/{handle}/",
                             ok=(204, 404)).status_code == 204:
                self.host.record_effect(f"delete Nautobot IP address {extra.get('address')} "
                                        f"(a second address for claim key {key})")
        return rows[0]

    def _allocate(self, request: ClaimRequest, prefix: Prefix) -> dict[str, Any]:
        if prefix.gateway is not None and prefix.gateway in prefix.network:
            self._reserve(prefix.gateway, prefix)
        body: dict[str, Any] = {
            "status": {"name": "Active"},
            "description": f"machine-agent {request.machine_namespace}/{request.machine_name} "
                           f"{request.interface}"[:200],
            "custom_fields": {CLAIM_FIELD: request.claim_key},
        }
        if request.hostname:
            body["dns_name"] = request.hostname
        path = f"/api/ipam/prefixes/{prefix.id}/available-ips/"
        for _ in range(RACE_ATTEMPTS):
            response = self.api.call("POST", path, json=body, ok=(201, 204, 400, 500))
            if response.status_code == 204:
                raise PoolExhausted(f"nautobot: pool {request.pool!r} (prefix "
                                    f"{prefix.network}) has no free address")
            if response.status_code == 400 and "already exists" not in response.text:
                raise AgentError(f"nautobot refused the allocation from prefix "
                                 f"{prefix.network}: {detail(response)}")
            if response.status_code == 201:
                created = self.api.json(response, "the allocation")
                row = self.api.row(created[0] if isinstance(created, list) and created
                                   else created, "the allocation")
                self.host.record_effect(f"create Nautobot IP address {row.get('address')} "
                                        f"for claim key {request.claim_key}")
                # Settle: a parallel run of the same key may have allocated too.
                return self._settled(request.claim_key) or row
            # 400 "already exists" (or 500, the database's own refusal): a parallel
            # allocation took that address first.
        raise IPAMUnavailable(f"nautobot: {RACE_ATTEMPTS} allocations from prefix "
                              f"{prefix.network} lost to parallel ones",
                              hint="nothing is needed on the node: the agent tries again")

    def _reserve(self, gateway: IP, prefix: Prefix) -> None:
        """An address for the gateway, so `available-ips` never hands it out."""
        if self._address_exists(gateway, prefix):
            return
        # Parallel agents reserving the same gateway: the losers get 400 "already
        # exists", or 500 when the database refused the row (IntegrityError).
        response = self.api.call("POST", "/api/ipam/ip-addresses/", ok=(201, 400, 500), json={
            "address": f"{gateway}/{prefix.network.prefixlen}",
            "status": {"name": "Reserved"},
            "namespace": {"name": self.options.namespace},
            "description": "gateway, reserved by machine-agent"})
        if response.status_code == 201:
            self.host.record_effect(f"create Nautobot IP address {gateway} (the gateway, "
                                    "reserved)")
        elif not self._address_exists(gateway, prefix):
            if response.status_code == 500:
                raise IPAMUnavailable(f"nautobot answered 500 reserving the gateway {gateway}")
            raise AgentError(f"nautobot: could not reserve the gateway {gateway} of prefix "
                             f"{prefix.network}: {detail(response)}",
                             hint="create the gateway's IP address in Nautobot (tag it "
                                  f"{GATEWAY_TAG!r}) so it is never handed out")

    def _address_exists(self, address: IP, prefix: Prefix) -> bool:
        rows = self.api.results("/api/ipam/ip-addresses/", {
            "address": str(address), "namespace": self.options.namespace})
        return any(ipaddress.ip_interface(self.api.text(r, "address", "address")).ip == address
                   for r in rows)

    def _prefix(self, request: ClaimRequest) -> Prefix:
        pool = self.options.pools.get(request.pool)
        if pool is None and checks.ip_network(request.pool) is None:
            pool = NautobotPool(prefix=request.pool)
        if pool is None:
            known = ", ".join(sorted(self.options.pools)) or "none"
            raise PoolNotFound(f"nautobot: no pool named {request.pool!r} (pools: {known})")
        want = ipaddress.ip_network(pool.prefix)
        rows = [r for r in self.api.results("/api/ipam/prefixes/", {
                    "prefix": str(want), "namespace": self.options.namespace})
                if ipaddress.ip_network(self.api.text(r, "prefix", "pool")) == want]
        if not rows:
            raise PoolNotFound(f"nautobot: prefix {want} of pool {request.pool!r} does not "
                               f"exist in namespace {self.options.namespace!r} of {self.base}")
        if want.version != (4 if request.family == "ipv4" else 6):
            raise PoolNotFound(f"nautobot: pool {request.pool!r} (prefix {want}) is not "
                               f"{request.family}")
        row = rows[0]
        prefix_id = checked_id(self.api.text(row, "id", "pool"))
        return Prefix(prefix_id, want, self._gateway(row, prefix_id, want))

    def _gateway(self, row: dict[str, Any], prefix_id: str,
                 net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> IP | None:
        """The prefix's custom field `gateway`, else an address in it tagged `gateway`."""
        value = (row.get("custom_fields") or {}).get(GATEWAY_FIELD)
        if value:
            return ipaddress.ip_interface(str(value)).ip
        for found in self.api.results("/api/ipam/ip-addresses/",
                                      {"parent": prefix_id, "tags": GATEWAY_TAG,
                                       "depth": "1"}):
            ip = ipaddress.ip_interface(self.api.text(found, "address", "address")).ip
            tags = [t.get("name") for t in found.get("tags") or [] if isinstance(t, dict)]
            if ip in net and GATEWAY_TAG in tags:
                return ip
        return None


def checked_id(value: str) -> str:
    """A Nautobot object id (a UUID) before it goes into a URL path."""
    import uuid

    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise InvalidAllocation(f"nautobot: {shown(value)} is not a Nautobot object id "
                                "(a UUID)") from None
