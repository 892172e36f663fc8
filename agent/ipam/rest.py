"""HTTP to an IPAM server's REST API (NetBox, Nautobot): what both plugins share.

A token in the Authorization header (registered as a secret), TLS verified against the
plugin's caFile or the operating system's trust store under the Host's root (a site CA
installed in the image; not requests' certifi bundle), the proxy the management client
would choose (agent.proxy), one retry of a request whose kept-alive connection the server
had closed, and failures in the IPAM reasons, naming the plugin's settings. Answers are
read field by field: a missing or mistyped field is InvalidAllocation naming it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agent.errors import AgentError, PermanentError, Reason, shown
from agent.ipam.base import InvalidAllocation, IPAMUnauthorized, IPAMUnavailable
from agent.logs import REDACT
from agent.proxy import ProxyURLInvalid, requests_proxies
from agent.tls import Trust, default_bundle, explain

if TYPE_CHECKING:
    import requests

    from agent.host import Host

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


def loopback_or_https(value: str) -> str | None:
    """An https:// base URL (plain http only for a loopback address: a server on the
    node itself, or a test server; nothing crosses a wire)."""
    parts = urlsplit(value)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1"):
        return None
    return f"{value!r} must be an https:// URL (plain http only for a loopback address)"


class RestAPI:
    """One IPAM server's REST API, as the plugin `name` (its settings' key) reaches it;
    `label` is how the product names itself (NetBox, Nautobot)."""

    def __init__(self, name: str, label: str, url: str, *, authorization: str, token: str,
                 ca_file: str | None, timeout: float, host: Host) -> None:
        import requests

        self.name = name
        self.label = label
        self.base = url.rstrip("/")
        self.timeout = timeout
        REDACT.add(token)
        self._headers = {"Authorization": authorization, "Accept": "application/json"}
        self._ca_file = str(host.path(ca_file)) if ca_file else None
        self._verify: str = self._ca_file or default_bundle(host.root)
        self._session = requests.Session()
        # No CA bundle or .netrc from the environment; the proxy, as the management
        # client chooses one (HTTPS_PROXY, NO_PROXY with CIDRs, never for loopback).
        self._session.trust_env = False
        try:
            self._session.proxies = requests_proxies(self.base, os.environ)
        except ProxyURLInvalid as err:
            raise PermanentError(f"{name}: the agent's environment: {err}",
                                 reason=Reason.ConfigInvalid,
                                 hint="fix or unset the variable") from err

    @classmethod
    def with_token_file(cls, name: str, label: str, url: str, token_file: str, *,
                        scheme: Callable[[str], str], ca_file: str | None, timeout: float,
                        host: Host) -> RestAPI:
        """The API with the token in `token_file` (read through the Host), sent as
        `<scheme(token)> <token>`; an empty or missing file is IPAMUnauthorized."""
        token = (host.read_text(token_file) or "").strip()
        if not token:
            raise IPAMUnauthorized(f"{name}: no token in {token_file}")
        return cls(name, label, url, authorization=f"{scheme(token)} {token}", token=token,
                   ca_file=ca_file, timeout=timeout, host=host)

    def call(self, method: str, path: str, *, ok: tuple[int, ...] = (200,),
             **kwargs: Any) -> requests.Response:
        import requests

        try:
            try:
                response = self._send(method, path, **kwargs)
            except requests.exceptions.ConnectionError as err:
                if method not in IDEMPOTENT or not _stale(err):
                    raise
                # A kept-alive connection the server (or a proxy) had closed while idle:
                # nothing reached the server, so asking again on a fresh one is safe.
                response = self._send(method, path, **kwargs)
        except requests.exceptions.SSLError as err:
            problem, fix = explain(err, self._trust())
            raise IPAMUnavailable(f"{self.name}: TLS verification of {self.base} failed: "
                                  f"{problem}", hint=fix) from err
        except requests.RequestException as err:
            raise IPAMUnavailable(f"{self.name}: {self.base} did not answer: "
                                  f"{type(err).__name__}") from err
        if response.status_code in ok:
            return response
        if response.status_code in (401, 403):
            raise IPAMUnauthorized(
                f"{self.name} refused the token ({response.status_code}): {detail(response)}",
                hint=f"check spec.ipam.plugins.{self.name}.tokenFile and the token's "
                     f"permissions in {self.label}")
        if response.status_code >= 500 or response.status_code == 429:
            raise IPAMUnavailable(f"{self.name} answered {response.status_code} on "
                                  f"{method} {path}")
        raise AgentError(f"{self.name} answered {response.status_code} on {method} {path}: "
                         f"{detail(response)}")

    def results(self, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
        """A list's `results` (up to 1,000: a pool's look-ups never need more)."""
        body = self.json(self.call("GET", path, params={**params, "limit": "1000"}), path)
        found = body.get("results") if isinstance(body, dict) else None
        if not isinstance(found, list):
            raise InvalidAllocation(f"{self.name}: the answer to {path} has no list "
                                    f"'results': {shown(str(body), 80)}")
        return [self.row(r, path) for r in found]

    def json(self, response: requests.Response, what: str) -> Any:
        try:
            return response.json()
        except ValueError:
            raise InvalidAllocation(f"{self.name}: the answer to {what} is not JSON: "
                                    f"{shown(response.text)}") from None

    def row(self, value: Any, what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise InvalidAllocation(f"{self.name}: the answer to {what} holds "
                                    f"{shown(str(value))} where an object was expected")
        return value

    def text(self, row: dict[str, Any], name: str, what: str) -> str:
        """A string field of an object, refused by name when missing or not a string."""
        value = row.get(name)
        if not isinstance(value, str) or not value:
            got = "missing" if value is None else shown(repr(value))
            raise InvalidAllocation(f"{self.name}: field {name!r} of a {self.label} {what} "
                                    f"object is {got}, not a non-empty string")
        return value

    def _send(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self._session.request(method, self.base + path, headers=self._headers,
                                     verify=self._verify, timeout=self.timeout, **kwargs)

    def _trust(self) -> Trust:
        """How the server's certificate is verified, in the words of the plugin's settings."""
        where = f"spec.ipam.plugins.{self.name}"
        if self._ca_file is not None:
            trusted, fix = self._ca_file, f"{where}.caFile must hold {self.label}'s CA"
        else:
            trusted, fix = self._verify, (f"give {self.label}'s CA in {where}.caFile, or "
                                          "install it in the system's trust store")
        return Trust(trusted=trusted, ca_fix=fix, name=urlsplit(self.base).hostname or "",
                     name_setting=f"{where}.url")


def detail(response: requests.Response) -> str:
    """What the server said was wrong, redacted and cut short."""
    try:
        body = response.json()
    except ValueError:
        return REDACT(response.text[:300])
    if isinstance(body, dict) and "detail" in body:
        return REDACT(str(body["detail"]))
    return REDACT(str(body)[:300])


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
