"""The `netbox` IPAM plugin: addresses from NetBox's REST API.

Idempotency does not rest on "search, then create" (racy: parallel agents got duplicates,
see shared/netbox-setup.md). Each address carries the claim key in the custom field
`machine_agent_claim_key`, which NetBox keeps unique; a claim first looks for its key,
then allocates with the key set, and a create refused for a duplicate key reads the
winner. NetBox serialises allocations from a prefix with a lock, so distinct keys never
get one address twice.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agent.config import checks
from agent.config.fields import Duration, setting
from agent.errors import AgentError
from agent.ipam.base import (
    Allocation,
    ClaimRequest,
    IPAMUnauthorized,
    IPAMUnavailable,
    PluginEnv,
    PoolExhausted,
    PoolNotFound,
    validate_allocation,
)
from agent.logs import REDACT

if TYPE_CHECKING:
    import requests

CLAIM_FIELD = "machine_agent_claim_key"
GATEWAY_FIELD = "gateway"
GATEWAY_TAG = "gateway"


def _netbox_url(value: str) -> str | None:
    parts = urlsplit(value)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1"):
        return None  # a NetBox on the node itself, or a test server; nothing crosses a wire
    return f"{value!r} must be an https:// URL (plain http only for a loopback address)"


@dataclass(frozen=True)
class NetBoxPool:
    prefix: str | None = setting("Allocate from this NetBox prefix (e.g. 192.0.2.0/24).",
                                 default=None, check=checks.ip_network)
    ip_range: str | None = setting(
        "Allocate from the NetBox IP range starting at this address (e.g. 203.0.113.10).",
        default=None, check=checks.ip_address)

    def validate(self) -> Any:
        if (self.prefix is None) == (self.ip_range is None):
            yield ("", "give exactly one of prefix or ipRange", None)


@dataclass(frozen=True)
class NetBoxOptions:
    url: str = setting("NetBox base URL, e.g. https://netbox.example.net.", check=_netbox_url)
    token_file: str = setting("File holding the API token (v2 `nbt_…` or v1).",
                              check=checks.absolute_path)
    ca_file: str | None = setting("CA bundle for NetBox's certificate; system CAs if unset.",
                                  default=None, check=checks.absolute_path)
    timeout: Duration = setting("Time-out of one request.", default=Duration(10),
                                check=checks.positive)
    pools: dict[str, NetBoxPool] = setting(
        "Pools by name. A pool name that is itself a prefix (2001:db8:10::/64) needs no entry.",
        factory=dict)


class NetBoxPlugin:
    name = "netbox"
    OPTIONS = NetBoxOptions

    def __init__(self, options: NetBoxOptions, env: PluginEnv) -> None:
        self.options = options
        self.base = options.url.rstrip("/")
        token = (env.host.read_text(options.token_file) or "").strip()
        if not token:
            raise IPAMUnauthorized(f"netbox: no token in {options.token_file}")
        REDACT.add(token)
        scheme = "Bearer" if token.startswith("nbt_") else "Token"
        self._headers = {"Authorization": f"{scheme} {token}", "Accept": "application/json"}
        self._verify: str | bool = (str(env.host.path(options.ca_file))
                                    if options.ca_file else True)
        self._session: requests.Session | None = None

    # -- the interface ----------------------------------------------------------------

    def claim(self, request: ClaimRequest) -> Allocation:
        existing = self._find(request.claim_key)
        if existing is None:
            existing = self._allocate(request)
        return validate_allocation(self._to_allocation(existing, request), request)

    def release(self, allocation: Allocation) -> None:
        self._call("DELETE", f"/api/ipam/ip-addresses/{allocation.handle}/", ok=(204, 404))

    # -- NetBox ------------------------------------------------------------------------

    def _find(self, key: str) -> dict[str, Any] | None:
        found = self._call("GET", "/api/ipam/ip-addresses/",
                           params={f"cf_{CLAIM_FIELD}": key}).json()["results"]
        return found[0] if found else None

    def _allocate(self, request: ClaimRequest) -> dict[str, Any]:
        kind, pool_id, network = self._pool(request)
        body = {
            "status": "active",
            "description": f"machine-agent {request.machine_namespace}/{request.machine_name} "
                           f"{request.interface}"[:200],
            "custom_fields": {CLAIM_FIELD: request.claim_key},
        }
        response = self._call("POST", f"/api/ipam/{kind}/{pool_id}/available-ips/",
                              json=body, ok=(201, 400, 409))
        if response.status_code == 201:
            created = response.json()
            row: dict[str, Any] = created[0] if isinstance(created, list) else created
            return row
        if response.status_code == 409:
            raise PoolExhausted(f"netbox: pool {request.pool!r} ({network}) has no free "
                                f"address: {_detail(response)}")
        # 400: another agent created the address for this key first; take the winner's.
        winner = self._find(request.claim_key)
        if winner is None:
            raise AgentError(f"netbox refused the allocation: {_detail(response)}")
        return winner

    def _pool(self, request: ClaimRequest) -> tuple[str, int, str]:
        """(`prefixes` or `ip-ranges`, its id, its network) for the claim's pool."""
        pool = self.options.pools.get(request.pool)
        if pool is None and checks.ip_network(request.pool) is None:
            pool = NetBoxPool(prefix=request.pool)
        if pool is None:
            known = ", ".join(sorted(self.options.pools)) or "none"
            raise PoolNotFound(f"netbox: no pool named {request.pool!r} (pools: {known})")
        if pool.prefix is not None:
            rows = self._call("GET", "/api/ipam/prefixes/",
                              params={"prefix": pool.prefix}).json()["results"]
            kind, what = "prefixes", pool.prefix
        else:
            rows = self._call("GET", "/api/ipam/ip-ranges/",
                              params={"start_address": pool.ip_range}).json()["results"]
            kind, what = "ip-ranges", str(pool.ip_range)
        if not rows:
            raise PoolNotFound(f"netbox: {kind[:-1].replace('-', ' ')} {what} of pool "
                               f"{request.pool!r} does not exist in NetBox")
        row = rows[0]
        network = row.get("prefix") or row["start_address"]
        if ipaddress.ip_interface(network).version != (4 if request.family == "ipv4" else 6):
            raise PoolNotFound(f"netbox: pool {request.pool!r} ({network}) is not "
                               f"{request.family}")
        return kind, int(row["id"]), str(network)

    def _to_allocation(self, row: dict[str, Any], request: ClaimRequest) -> Allocation:
        iface = ipaddress.ip_interface(row["address"])
        return Allocation(address=str(iface.ip), prefix=iface.network.prefixlen,
                          gateway=self._gateway(iface.network), family=request.family,
                          handle=str(row["id"]), backend=f"netbox {self.base}")

    def _gateway(self, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> str | None:
        """NetBox has no gateway field: a custom field on the prefix, else an address in
        the prefix tagged `gateway`."""
        rows = self._call("GET", "/api/ipam/prefixes/",
                          params={"contains": str(network.network_address)}).json()["results"]
        for row in sorted(rows, key=lambda r: -ipaddress.ip_network(r["prefix"]).prefixlen):
            value = (row.get("custom_fields") or {}).get(GATEWAY_FIELD)
            if value:
                return str(ipaddress.ip_address(str(value).split("/")[0]))
        tagged = self._call("GET", "/api/ipam/ip-addresses/",
                            params={"parent": str(network), "tag": GATEWAY_TAG}).json()
        for row in tagged["results"]:
            return str(ipaddress.ip_interface(row["address"]).ip)
        return None

    def _call(self, method: str, path: str, *, ok: tuple[int, ...] = (200,),
              **kwargs: Any) -> requests.Response:
        import requests

        if self._session is None:
            self._session = requests.Session()
            self._session.trust_env = False  # no proxy or CA from the environment
        try:
            response = self._session.request(method, self.base + path, headers=self._headers,
                                             verify=self._verify,
                                             timeout=float(self.options.timeout), **kwargs)
        except requests.exceptions.SSLError as err:
            raise AgentError(f"netbox: TLS verification of {self.base} failed: {err}",
                             hint="give spec.ipam.plugins.netbox.caFile") from err
        except requests.RequestException as err:
            raise IPAMUnavailable(f"netbox: {self.base} did not answer: "
                                  f"{type(err).__name__}") from err
        if response.status_code in ok:
            return response
        if response.status_code in (401, 403):
            raise IPAMUnauthorized(f"netbox refused the token ({response.status_code}): "
                                   f"{_detail(response)}")
        if response.status_code >= 500 or response.status_code == 429:
            raise IPAMUnavailable(f"netbox answered {response.status_code} on {method} {path}")
        raise AgentError(f"netbox answered {response.status_code} on {method} {path}: "
                         f"{_detail(response)}")


def _detail(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return REDACT(response.text[:300])
    if isinstance(body, dict) and "detail" in body:
        return REDACT(str(body["detail"]))
    return REDACT(str(body)[:300])
