"""HTTP proxies, chosen as client-go (Go's net/http ProxyFromEnvironment) chooses them, so
a node that reaches its management cluster with kubectl through a proxy reaches it with
the agent too.

- A kubeconfig cluster's `proxy-url` is used for every request to that cluster.
- Otherwise `HTTPS_PROXY` / `https_proxy` (https URLs) and `HTTP_PROXY` / `http_proxy`
  (http URLs), the upper-case name first, unless `NO_PROXY` / `no_proxy` exempts the host:
  `*` (everything), an IP address, a CIDR range (`192.0.2.0/24`, matched against an IP
  address in the URL only: names are not resolved to decide), a domain name (that name
  and its subdomains), `.domain` (subdomains only), each optionally with `:port`.
- Requests to `localhost` and loopback addresses never go through a proxy from the
  environment (Go's rule), only through an explicit `proxy-url`.

Proxies are spoken to in plain HTTP (a CONNECT tunnel carries the TLS to the server, which
is verified as without a proxy); `https://` and `socks5://` proxy URLs are refused by name.
A proxy's user and password go only into the `Proxy-Authorization` header and are
registered as secrets (never logged).
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping
from dataclasses import field
from urllib.parse import unquote, urlsplit

from agent.logs import REDACT
from agent.recordtype import record


class ProxyURLInvalid(ValueError):
    """A proxy URL the agent cannot use; the message says why and what to write."""


@record(frozen=True)
class Proxy:
    """Where to open the tunnel, and the header that authenticates to the proxy."""

    host: str
    port: int
    authorization: str | None = field(default=None, repr=False)
    url: str = field(default="", repr=False, compare=False)
    """As given (with its credentials): for requests' `proxies`."""

    @property
    def headers(self) -> dict[str, str]:
        return {"Proxy-Authorization": self.authorization} if self.authorization else {}


def parse_proxy_url(url: str) -> Proxy:
    """An `http://[user:password@]host[:port]` proxy URL (a bare `host:port` too, as Go
    reads one)."""
    if any(ch in url for ch in "\r\n\x00") or any(ord(ch) < 0x20 for ch in url):
        raise ProxyURLInvalid("a proxy URL holds a control character")
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise ProxyURLInvalid(
            f"proxy scheme {parts.scheme!r} is not supported: the agent speaks to proxies "
            "in plain HTTP and tunnels TLS through CONNECT; write http://host:port")
    try:
        host, port = parts.hostname, parts.port
    except ValueError as err:
        raise ProxyURLInvalid(f"the proxy's port is not a port number ({err})") from err
    if not host:
        raise ProxyURLInvalid("the proxy URL names no host; write http://host:port")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ProxyURLInvalid("a proxy URL is http://host:port, without a path or query")
    authorization = None
    if parts.username is not None:
        user, password = unquote(parts.username), unquote(parts.password or "")
        REDACT.add(password)
        REDACT.add(parts.password)  # as written in the URL, percent-escapes and all
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        REDACT.add(token)
        authorization = f"Basic {token}"
    return Proxy(host, port or 80, authorization, url)


@record(frozen=True)
class ProxySettings:
    """Which proxy, if any, a request to a URL goes through."""

    https: Proxy | None = None
    http: Proxy | None = None
    no_proxy: tuple[str, ...] = ()
    explicit: Proxy | None = None
    """A kubeconfig's proxy-url: every request, loopback and NO_PROXY included."""

    def for_url(self, scheme: str, host: str, port: int | None) -> Proxy | None:
        if self.explicit is not None:
            return self.explicit
        chosen = self.https if scheme == "https" else self.http
        if chosen is None or _is_loopback(host) or _exempt(self.no_proxy, host, port):
            return None
        return chosen


NONE = ProxySettings()


def from_environment(environ: Mapping[str, str], *, explicit: str | None = None
                     ) -> ProxySettings:
    """The settings a process started with `environ` uses (and a kubeconfig's proxy-url).
    A malformed variable is a ProxyURLInvalid naming it."""
    def proxy(*names: str) -> Proxy | None:
        for name in names:
            value = environ.get(name, "").strip()
            if value:
                try:
                    return parse_proxy_url(value)
                except ProxyURLInvalid as err:
                    raise ProxyURLInvalid(f"{name}: {err}") from err
        return None

    no_proxy = next((environ[n] for n in ("NO_PROXY", "no_proxy") if environ.get(n)), "")
    return ProxySettings(
        https=proxy("HTTPS_PROXY", "https_proxy"),
        http=proxy("HTTP_PROXY", "http_proxy"),
        no_proxy=tuple(e.strip().lower() for e in no_proxy.split(",") if e.strip()),
        explicit=parse_proxy_url(explicit) if explicit else None)


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _exempt(entries: tuple[str, ...], host: str, port: int | None) -> bool:
    """Go's httpproxy matching of NO_PROXY entries."""
    host = host.lower().rstrip(".")
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = \
            ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in entries:
        if entry == "*":
            return True
        if "/" in entry:
            try:
                if address is not None and address in ipaddress.ip_network(entry,
                                                                           strict=False):
                    return True
            except ValueError:
                pass
            continue
        name, entry_port = _split_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        try:
            entry_address = ipaddress.ip_address(name)
        except ValueError:
            entry_address = None
        if entry_address is not None:
            if address == entry_address:
                return True
            continue
        name = name.rstrip(".")
        if name.startswith("*."):
            name = name[1:]
        if name.startswith("."):
            if host.endswith(name):
                return True
        elif host == name or host.endswith("." + name):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):  # [2001:db8::1]:443
        end = entry.find("]")
        rest = entry[end + 1:]
        port = int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
        return entry[1:end], port
    if entry.count(":") == 1:
        name, _, port_text = entry.partition(":")
        return name, int(port_text) if port_text.isdigit() else None
    return entry, None


def requests_proxies(url: str, environ: Mapping[str, str]) -> dict[str, str]:
    """requests' `proxies` for a client of the one server at `url` (a NetBox), chosen by
    the same rules: an empty dict means a direct connection."""
    parts = urlsplit(url)
    proxy = from_environment(environ).for_url(parts.scheme, parts.hostname or "", parts.port)
    return {parts.scheme: proxy.url} if proxy is not None else {}
