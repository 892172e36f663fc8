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
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agent.config import checks
from agent.config.fields import Duration, setting
from agent.errors import AgentError, PermanentError, Reason, shown
from agent.ipam.base import (
    Allocation,
    ClaimRequest,
    InvalidAllocation,
    IPAMUnauthorized,
    IPAMUnavailable,
    PluginEnv,
    PoolExhausted,
    PoolNotFound,
    validate_allocation,
)
from agent.logs import REDACT
from agent.proxy import ProxyURLInvalid, requests_proxies
from agent.tls import Trust, default_bundle, explain

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


IP = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
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
        import requests

        self.options = options
        self.host = env.host
        self.base = options.url.rstrip("/")
        token = (env.host.read_text(options.token_file) or "").strip()
        if not token:
            raise IPAMUnauthorized(f"netbox: no token in {options.token_file}")
        REDACT.add(token)
        scheme = "Bearer" if token.startswith("nbt_") else "Token"
        self._headers = {"Authorization": f"{scheme} {token}", "Accept": "application/json"}
        # Without caFile: the operating system's trust store under the Host's root (a
        # site CA installed in the image), not requests' certifi bundle.
        self._ca_file = str(env.host.path(options.ca_file)) if options.ca_file else None
        self._verify: str = self._ca_file or default_bundle(env.host.root)
        self._session = requests.Session()
        # No CA bundle or .netrc from the environment; the proxy, as the management
        # client chooses one (HTTPS_PROXY, NO_PROXY with CIDRs, never for loopback).
        self._session.trust_env = False
        try:
            self._session.proxies = requests_proxies(self.base, os.environ)
        except ProxyURLInvalid as err:
            raise PermanentError(f"netbox: the agent's environment: {err}",
                                 reason=Reason.ConfigInvalid,
                                 hint="fix or unset the variable") from err

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
        address = ipaddress.ip_interface(_text(row, "address", "address"))
        if not pool.holds(address.ip):
            raise InvalidAllocation(
                f"netbox: claim key {request.claim_key!r} already holds {address}, which is "
                f"outside pool {request.pool!r} ({pool.label})",
                hint="release it first (machine-agent reset) or delete that address in NetBox")
        return validate_allocation(self._to_allocation(row, request), request)

    def release(self, allocation: Allocation) -> None:
        response = self._call("DELETE", f"/api/ipam/ip-addresses/{int(allocation.handle)}/",
                              ok=(204, 404))
        if response.status_code == 204:
            self.host.record_effect(f"delete NetBox IP address {allocation.address} "
                                    f"(id {int(allocation.handle)})")

    # -- NetBox ------------------------------------------------------------------------

    def _find(self, key: str) -> dict[str, Any] | None:
        rows = self._results("/api/ipam/ip-addresses/", {f"cf_{CLAIM_FIELD}": key})
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
        response = self._call("POST", f"/api/ipam/{pool.kind}/{pool.id}/available-ips/",
                              json=body, ok=(201, 400, 409))
        if response.status_code == 201:
            created = _json(response, "the allocation")
            row: dict[str, Any] = _row(created[0] if isinstance(created, list) and created
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
                                f"address: {_detail(response)}")
        raise AgentError(f"netbox refused the allocation from {pool.label}: "
                         f"{_detail(response)}")

    def _reserve_gateway(self, gateway: IP, pool: Pool) -> None:
        """Make sure `available-ips` will not hand out the gateway: an address must exist
        for it. Created `reserved` under a claim key of its own, so parallel agents
        create it once and the losers' 400 is expected."""
        if self._address_exists(gateway):
            return
        prefix = self._prefix_containing(gateway)
        length = ipaddress.ip_network(_text(prefix, "prefix", "pool")).prefixlen if prefix else (
            32 if gateway.version == 4 else 128)
        response = self._call("POST", "/api/ipam/ip-addresses/", ok=(201, 400), json={
            "address": f"{gateway}/{length}", "status": "reserved",
            "description": "gateway, reserved by machine-agent",
            "custom_fields": {CLAIM_FIELD: f"machine-agent/gateway/{gateway}"}})
        if response.status_code == 201:
            self.host.record_effect(f"create NetBox IP address {gateway}/{length} (the "
                                    "gateway, reserved)")
        if response.status_code == 400 and not self._address_exists(gateway):
            raise AgentError(f"netbox: could not reserve the gateway {gateway} of "
                             f"{pool.label}: {_detail(response)}",
                             hint="create the gateway's IP address in NetBox (tag it "
                                  f"{GATEWAY_TAG!r}) so it is never handed out")

    def _address_exists(self, address: IP) -> bool:
        rows = self._results("/api/ipam/ip-addresses/", {"address": str(address)})
        return any(ipaddress.ip_interface(_text(r, "address", "address")).ip == address
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
            rows = [r for r in self._results("/api/ipam/prefixes/", {"prefix": str(want)})
                    if ipaddress.ip_network(_text(r, "prefix", "pool")) == want]
            kind, label = "prefixes", f"prefix {want}"
        else:
            start = ipaddress.ip_address(str(pool.ip_range))
            rows = [r for r in self._results("/api/ipam/ip-ranges/",
                                             {"start_address": str(start)})
                    if ipaddress.ip_interface(_text(r, "start_address", "pool")).ip == start]
            kind, label = "ip-ranges", f"IP range starting at {start}"
        if not rows:
            raise PoolNotFound(f"netbox: the {label} of pool {request.pool!r} does not "
                               f"exist in {self.base}")
        row = rows[0]
        if kind == "prefixes":
            net = ipaddress.ip_network(_text(row, "prefix", "pool"))
            first, last = net.network_address, net.broadcast_address
        else:
            first = ipaddress.ip_interface(_text(row, "start_address", "pool")).ip
            last = ipaddress.ip_interface(_text(row, "end_address", "pool")).ip
            label = f"IP range {first}-{last}"
        if first.version != (4 if request.family == "ipv4" else 6):
            raise PoolNotFound(f"netbox: pool {request.pool!r} ({label}) is not "
                               f"{request.family}")
        return Pool(kind, _number(row, "id", "pool"), first, last, label)

    def _to_allocation(self, row: dict[str, Any], request: ClaimRequest) -> Allocation:
        iface = ipaddress.ip_interface(_text(row, "address", "address"))
        gateway = self._gateway_of(iface.ip)
        return Allocation(address=str(iface.ip), prefix=iface.network.prefixlen,
                          gateway=str(gateway) if gateway is not None else None,
                          family=request.family, handle=str(_number(row, "id", "address")),
                          backend=f"netbox {self.base}")

    def _prefix_containing(self, address: IP) -> dict[str, Any] | None:
        """The most specific prefix that holds `address`."""
        rows = [r for r in self._results("/api/ipam/prefixes/", {"contains": str(address)})
                if address in ipaddress.ip_network(_text(r, "prefix", "pool"))]
        rows.sort(key=lambda r: -ipaddress.ip_network(_text(r, "prefix", "pool")).prefixlen)
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
        net = ipaddress.ip_network(_text(prefix, "prefix", "pool"))
        for row in self._results("/api/ipam/ip-addresses/",
                                 {"parent": str(net), "tag": GATEWAY_TAG}):
            ip = ipaddress.ip_interface(_text(row, "address", "address")).ip
            if ip in net and any(t.get("slug") == GATEWAY_TAG for t in row.get("tags") or []):
                return ip
        return None

    def _results(self, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
        body = _json(self._call("GET", path, params={**params, "limit": "1000"}), path)
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list):
            raise InvalidAllocation(f"netbox: the answer to {path} has no list 'results': "
                                    f"{shown(str(body), 80)}")
        return [_row(r, path) for r in results]

    def _trust(self) -> Trust:
        """How NetBox's certificate is verified, in the words of the plugin's settings."""
        if self._ca_file is not None:
            trusted, fix = self._ca_file, "spec.ipam.plugins.netbox.caFile must hold NetBox's CA"
        else:
            trusted, fix = self._verify, ("give NetBox's CA in "
                                          "spec.ipam.plugins.netbox.caFile, or install it in "
                                          "the system's trust store")
        return Trust(trusted=trusted, ca_fix=fix, name=urlsplit(self.base).hostname or "",
                     name_setting="spec.ipam.plugins.netbox.url")

    def _call(self, method: str, path: str, *, ok: tuple[int, ...] = (200,),
              **kwargs: Any) -> requests.Response:
        import requests

        try:
            try:
                response = self._session.request(
                    method, self.base + path, headers=self._headers, verify=self._verify,
                    timeout=float(self.options.timeout), **kwargs)
            except requests.exceptions.ConnectionError as err:
                if method not in IDEMPOTENT or not _stale(err):
                    raise
                # A kept-alive connection the server (or a proxy) had closed while idle:
                # nothing reached NetBox, so asking again on a fresh one is safe.
                response = self._session.request(
                    method, self.base + path, headers=self._headers, verify=self._verify,
                    timeout=float(self.options.timeout), **kwargs)
        except requests.exceptions.SSLError as err:
            problem, fix = explain(err, self._trust())
            raise IPAMUnavailable(f"netbox: TLS verification of {self.base} failed: "
                                  f"{problem}", hint=fix) from err
        except requests.RequestException as err:
            raise IPAMUnavailable(f"netbox: {self.base} did not answer: "
                                  f"{type(err).__name__}") from err
        if response.status_code in ok:
            return response
        if response.status_code in (401, 403):
            raise IPAMUnauthorized(f"netbox refused the token ({response.status_code}): "
                                   f"{_detail(response)}",
                                   hint="check spec.ipam.plugins.netbox.tokenFile and the "
                                        "token's permissions in NetBox")
        if response.status_code >= 500 or response.status_code == 429:
            raise IPAMUnavailable(f"netbox answered {response.status_code} on {method} {path}")
        raise AgentError(f"netbox answered {response.status_code} on {method} {path}: "
                         f"{_detail(response)}")


def _json(response: requests.Response, what: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise InvalidAllocation(f"netbox: the answer to {what} is not JSON: "
                                f"{shown(response.text)}") from None


def _row(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidAllocation(f"netbox: the answer to {what} holds {shown(str(value))} "
                                "where an object was expected")
    return value


def _text(row: dict[str, Any], name: str, what: str) -> str:
    """A string field of a NetBox object, refused by name when missing or not a string."""
    value = row.get(name)
    if not isinstance(value, str) or not value:
        got = "missing" if value is None else shown(repr(value))
        raise InvalidAllocation(f"netbox: field {name!r} of a NetBox {what} object is "
                                f"{got}, not a non-empty string")
    return value


def _number(row: dict[str, Any], name: str, what: str) -> int:
    value = row.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        got = "missing" if value is None else shown(repr(value))
        raise InvalidAllocation(f"netbox: field {name!r} of a NetBox {what} object is {got}, "
                                "not a number")
    return value


def _detail(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return REDACT(response.text[:300])
    if isinstance(body, dict) and "detail" in body:
        return REDACT(str(body["detail"]))
    return REDACT(str(body)[:300])


IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


def _stale(err: BaseException) -> bool:
    """Whether a request failed because its pooled connection was closed by the other
    end before answering (http.client's RemoteDisconnected, or a reset)."""
    import http.client

    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, (http.client.RemoteDisconnected, ConnectionResetError)):
            return True
        cause = cause.__cause__ or cause.__context__
    return False
