"""The `netbox` IPAM plugin: addresses from NetBox's REST API.

What it relies on was measured against NetBox 4.7.3 (tests/integration/netbox/README.md):
- Idempotency does not rest on "search, then create" (racy: parallel agents got
  duplicates). Each address carries the claim key in the custom field
  `machine_agent_claim_key`, which must be `unique` with `filter_logic=exact`. A claim
  looks its key up, else allocates with `available-ips` and the key set; a create refused
  with 400 (duplicate key) or 409 (NetBox checks space before uniqueness, so a retry in a
  pool that has since filled answers 409) looks the key up again and takes the winner.
  NetBox runs every available-ips POST and address create under one advisory lock, so
  distinct keys never get one address and one key never gets two.
- NetBox ignores filters it does not know (answering with everything), so every look-up
  checks its results itself.
- NetBox does not know the gateway: `available-ips` hands it out like any address. Before
  allocating from a pool whose gateway lies inside it, the plugin makes sure an address
  exists for the gateway, creating a `reserved` one whose claim key names the gateway
  (unique, so parallel agents create it once).
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


@record(frozen=True)
class NetBoxPool:
    prefix: str | None = setting("Allocate from this NetBox prefix (e.g. 192.0.2.0/24).",
                                 default=None, check=checks.ip_network)
    ip_range: str | None = setting(
        "Allocate from the NetBox IP range starting at this address (e.g. 203.0.113.10).",
        default=None, check=checks.ip_address)

    def validate(self) -> Any:
        if (self.prefix is None) == (self.ip_range is None):
            yield ("", "give exactly one of prefix or ipRange", None)


@record(frozen=True)
class NetBoxOptions:
    url: str = setting("NetBox base URL, e.g. https://netbox.example.net.", check=loopback_or_https)
    token_file: str = setting("File holding the API token (v2 `nbt_…` or v1).",
                              check=checks.absolute_path)
    ca_file: str | None = setting("CA bundle for NetBox's certificate; system CAs if unset.",
                                  default=None, check=checks.absolute_path)
    timeout: Duration = setting("Time-out of one request.", default=Duration(10),
                                check=checks.positive)
    pools: dict[str, NetBoxPool] = setting(
        "Pools by name. A pool name that is itself a prefix (2001:db8:10::/64) needs no entry.",
        factory=dict)


IP = ipaddress.IPv4Address | ipaddress.IPv6Address


@record(frozen=True)
class Pool:
    """A NetBox prefix or IP range, as found in NetBox."""

    kind: str
    """`prefixes` or `ip-ranges` (the API path)."""
    id: int
    first: IP
    last: IP
    label: str

    def holds(self, address: IP) -> bool:
        return (address.version == self.first.version
                and int(self.first) <= int(address) <= int(self.last))


class NetBoxPlugin:
    name = "netbox"
    OPTIONS = NetBoxOptions

    def __init__(self, options: NetBoxOptions, env: PluginEnv) -> None:
        self.options = options
        self.host = env.host
        self.base = options.url.rstrip("/")
        # a v2 token (nbt_...) goes as Bearer, a v1 token as Token
        self.api = RestAPI.with_token_file(
            "netbox", "NetBox", self.base, options.token_file,
            scheme=lambda token: "Bearer" if token.startswith("nbt_") else "Token",
            ca_file=options.ca_file, timeout=float(options.timeout), host=env.host)

    # -- the interface ----------------------------------------------------------------

    def claim(self, request: ClaimRequest) -> Allocation:
        """The address for the claim key; a malformed answer (not JSON, a field missing or
        of the wrong type, not an address) is InvalidAllocation naming the field."""
        try:
            return self._claim(request)
        except (ValueError, TypeError) as err:  # the few the field helpers do not name
            raise InvalidAllocation(f"netbox {self.base}: unusable answer: "
                                    f"{shown(str(err), 200)}") from None

    def _claim(self, request: ClaimRequest) -> Allocation:
        pool = self._pool(request)
        row = self._find(request.claim_key)
        if row is None:
            row = self._allocate(request, pool)
        address = ipaddress.ip_interface(self.api.text(row, "address", "address"))
        if not pool.holds(address.ip):
            raise InvalidAllocation(
                f"netbox: claim key {request.claim_key!r} already holds {address}, which is "
                f"outside pool {request.pool!r} ({pool.label})",
                hint="release it first (machine-agent reset) or delete that address in NetBox")
        return validate_allocation(self._to_allocation(row, request), request)

    def release(self, allocation: Allocation) -> None:
        response = self.api.call("DELETE", f"/api/ipam/ip-addresses/{int(allocation.handle)}/",
                              ok=(204, 404))
        if response.status_code == 204:
            self.host.record_effect(f"delete NetBox IP address {allocation.address} "
                                    f"(id {int(allocation.handle)})")

    # -- NetBox ------------------------------------------------------------------------

    def _find(self, key: str) -> dict[str, Any] | None:
        rows = self.api.results("/api/ipam/ip-addresses/", {f"cf_{CLAIM_FIELD}": key})
        # exact only because the custom field's filter logic is `exact`; check anyway
        mine = [r for r in rows if (r.get("custom_fields") or {}).get(CLAIM_FIELD) == key]
        return mine[0] if mine else None

    def _allocate(self, request: ClaimRequest, pool: Pool) -> dict[str, Any]:
        gateway = self._gateway_of(pool.first)
        if gateway is not None and pool.holds(gateway):
            self._reserve_gateway(gateway, pool)
        body: dict[str, Any] = {
            "status": "active",
            "description": f"machine-agent {request.machine_namespace}/{request.machine_name} "
                           f"{request.interface}"[:200],
            "custom_fields": {CLAIM_FIELD: request.claim_key},
        }
        if request.hostname:
            body["dns_name"] = request.hostname
        response = self.api.call("POST", f"/api/ipam/{pool.kind}/{pool.id}/available-ips/",
                              json=body, ok=(201, 400, 409))
        if response.status_code == 201:
            created = self.api.json(response, "the allocation")
            row: dict[str, Any] = self.api.row(created[0] if isinstance(created, list) and created
                                       else created, "the allocation")
            self.host.record_effect(f"create NetBox IP address {row.get('address')} for "
                                    f"claim key {request.claim_key}")
            return row
        # 400: another agent stored this key first (NetBox: "must have a unique value");
        # 409: no space, which NetBox checks before uniqueness -- the key may be stored.
        winner = self._find(request.claim_key)
        if winner is not None:
            return winner
        if response.status_code == 409:
            raise PoolExhausted(f"netbox: pool {request.pool!r} ({pool.label}) has no free "
                                f"address: {detail(response)}")
        raise AgentError(f"netbox refused the allocation from {pool.label}: "
                         f"{detail(response)}")

    def _reserve_gateway(self, gateway: IP, pool: Pool) -> None:
        """Make sure `available-ips` will not hand out the gateway: an address must exist
        for it. Created `reserved` under a claim key of its own, so parallel agents
        create it once and the losers' 400 is expected."""
        if self._address_exists(gateway):
            return
        prefix = self._prefix_containing(gateway)
        length = (ipaddress.ip_network(self.api.text(prefix, "prefix", "pool")).prefixlen
                  if prefix else 32 if gateway.version == 4 else 128)
        response = self.api.call("POST", "/api/ipam/ip-addresses/", ok=(201, 400), json={
            "address": f"{gateway}/{length}", "status": "reserved",
            "description": "gateway, reserved by machine-agent",
            "custom_fields": {CLAIM_FIELD: f"machine-agent/gateway/{gateway}"}})
        if response.status_code == 201:
            self.host.record_effect(f"create NetBox IP address {gateway}/{length} (the "
                                    "gateway, reserved)")
        if response.status_code == 400 and not self._address_exists(gateway):
            raise AgentError(f"netbox: could not reserve the gateway {gateway} of "
                             f"{pool.label}: {detail(response)}",
                             hint="create the gateway's IP address in NetBox (tag it "
                                  f"{GATEWAY_TAG!r}) so it is never handed out")

    def _address_exists(self, address: IP) -> bool:
        rows = self.api.results("/api/ipam/ip-addresses/", {"address": str(address)})
        return any(ipaddress.ip_interface(self.api.text(r, "address", "address")).ip == address
                   for r in rows)

    def _pool(self, request: ClaimRequest) -> Pool:
        """The NetBox prefix or IP range of the claim's pool."""
        pool = self.options.pools.get(request.pool)
        if pool is None and checks.ip_network(request.pool) is None:
            pool = NetBoxPool(prefix=request.pool)
        if pool is None:
            known = ", ".join(sorted(self.options.pools)) or "none"
            raise PoolNotFound(f"netbox: no pool named {request.pool!r} (pools: {known})")
        if pool.prefix is not None:
            want = ipaddress.ip_network(pool.prefix)
            rows = [r for r in self.api.results("/api/ipam/prefixes/", {"prefix": str(want)})
                    if ipaddress.ip_network(self.api.text(r, "prefix", "pool")) == want]
            kind, label = "prefixes", f"prefix {want}"
        else:
            start = ipaddress.ip_address(str(pool.ip_range))
            rows = [r for r in self.api.results("/api/ipam/ip-ranges/",
                                             {"start_address": str(start)})
                    if ipaddress.ip_interface(
                        self.api.text(r, "start_address", "pool")).ip == start]
            kind, label = "ip-ranges", f"IP range starting at {start}"
        if not rows:
            raise PoolNotFound(f"netbox: the {label} of pool {request.pool!r} does not "
                               f"exist in {self.base}")
        row = rows[0]
        if kind == "prefixes":
            net = ipaddress.ip_network(self.api.text(row, "prefix", "pool"))
            first, last = net.network_address, net.broadcast_address
        else:
            first = ipaddress.ip_interface(self.api.text(row, "start_address", "pool")).ip
            last = ipaddress.ip_interface(self.api.text(row, "end_address", "pool")).ip
            label = f"IP range {first}-{last}"
        if first.version != (4 if request.family == "ipv4" else 6):
            raise PoolNotFound(f"netbox: pool {request.pool!r} ({label}) is not "
                               f"{request.family}")
        return Pool(kind, _number(row, "id", "pool"), first, last, label)

    def _to_allocation(self, row: dict[str, Any], request: ClaimRequest) -> Allocation:
        iface = ipaddress.ip_interface(self.api.text(row, "address", "address"))
        gateway = self._gateway_of(iface.ip)
        return Allocation(address=str(iface.ip), prefix=iface.network.prefixlen,
                          gateway=str(gateway) if gateway is not None else None,
                          family=request.family, handle=str(_number(row, "id", "address")),
                          backend=f"netbox {self.base}")

    def _prefix_containing(self, address: IP) -> dict[str, Any] | None:
        """The most specific prefix that holds `address`."""
        rows = [r for r in self.api.results("/api/ipam/prefixes/", {"contains": str(address)})
                if address in ipaddress.ip_network(self.api.text(r, "prefix", "pool"))]
        rows.sort(key=lambda r: -ipaddress.ip_network(self.api.text(r, "prefix", "pool")).prefixlen)
        return rows[0] if rows else None

    def _gateway_of(self, address: IP) -> IP | None:
        """NetBox has no gateway field: the custom field `gateway` of the most specific
        prefix holding `address`, else an address in that prefix tagged `gateway`."""
        prefix = self._prefix_containing(address)
        if prefix is None:
            return None
        value = (prefix.get("custom_fields") or {}).get(GATEWAY_FIELD)
        if value:
            return ipaddress.ip_interface(str(value)).ip
        net = ipaddress.ip_network(self.api.text(prefix, "prefix", "pool"))
        for row in self.api.results("/api/ipam/ip-addresses/",
                                 {"parent": str(net), "tag": GATEWAY_TAG}):
            ip = ipaddress.ip_interface(self.api.text(row, "address", "address")).ip
            if ip in net and any(t.get("slug") == GATEWAY_TAG for t in row.get("tags") or []):
                return ip
        return None



def _number(row: dict[str, Any], name: str, what: str) -> int:
    value = row.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        got = "missing" if value is None else shown(repr(value))
        raise InvalidAllocation(f"netbox: field {name!r} of a NetBox {what} object is {got}, "
                                "not a number")
    return value
