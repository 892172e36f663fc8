"""Which proxy a request takes: the rules of Go's ProxyFromEnvironment (client-go's), so
a node whose kubectl reaches the cluster through a proxy has an agent that does too."""

from __future__ import annotations

import base64

import pytest

from agent.errors import PermanentError, Reason
from agent.kube.kubeconfig import Credentials, proxy_settings
from agent.logs import REDACT
from agent.proxy import ProxyURLInvalid, from_environment, parse_proxy_url, requests_proxies

ENV = {"HTTPS_PROXY": "http://proxy.example.com:3128", "HTTP_PROXY": "http://plain:8080"}


def via(environ: dict[str, str], url_host: str, port: int | None = 443,
        scheme: str = "https") -> str | None:
    proxy = from_environment(environ).for_url(scheme, url_host, port)
    return f"{proxy.host}:{proxy.port}" if proxy else None


def test_https_urls_take_https_proxy_and_http_urls_http_proxy() -> None:
    assert via(ENV, "mgmt.example.com") == "proxy.example.com:3128"
    assert via(ENV, "netbox.example.com", 80, "http") == "plain:8080"


def test_upper_case_variable_wins_over_lower_case_as_in_go() -> None:
    env = {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2"}
    assert via(env, "mgmt.example.com") == "upper:1"
    assert via({"https_proxy": "http://lower:2"}, "mgmt.example.com") == "lower:2"


@pytest.mark.parametrize(("no_proxy", "host", "port", "direct"), [
    ("192.0.2.0/24", "192.0.2.10", 6443, True),
    ("192.0.2.0/24", "198.51.100.10", 6443, False),
    ("2001:db8::/32", "2001:db8::1", 6443, True),
    ("192.0.2.0/24", "mgmt.example.com", 6443, False),  # names are never resolved to decide
    ("example.com", "example.com", 443, True),
    ("example.com", "mgmt.example.com", 443, True),
    ("example.com", "notexample.com", 443, False),
    (".example.com", "example.com", 443, False),
    (".example.com", "mgmt.example.com", 443, True),
    ("mgmt.example.com:6443", "mgmt.example.com", 6443, True),
    ("mgmt.example.com:6443", "mgmt.example.com", 443, False),
    ("203.0.113.5", "203.0.113.5", 443, True),
    ("[2001:db8::5]:6443", "2001:db8::5", 6443, True),
    ("*", "anything.example.org", 443, True),
    (" other.org , Example.COM ", "mgmt.example.com", 443, True),
])
def test_no_proxy_entries_match_as_gos_httpproxy(no_proxy: str, host: str, port: int,
                                                  direct: bool) -> None:
    env = {**ENV, "NO_PROXY": no_proxy}
    assert (via(env, host, port) is None) is direct


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.53"])
def test_loopback_never_takes_a_proxy_from_the_environment(host: str) -> None:
    assert via(ENV, host) is None


def test_a_kubeconfigs_proxy_url_is_used_for_every_request_loopback_included() -> None:
    settings = from_environment({**ENV, "NO_PROXY": "*"}, explicit="http://relay:3128")
    proxy = settings.for_url("https", "127.0.0.1", 6443)
    assert proxy is not None and (proxy.host, proxy.port) == ("relay", 3128)


def test_no_environment_means_direct() -> None:
    assert via({}, "mgmt.example.com") is None


def test_proxy_credentials_become_a_basic_header_and_are_never_shown() -> None:
    proxy = parse_proxy_url("http://node%40site:s3cr%3At@proxy.example.com:3128")
    expected = base64.b64encode(b"node@site:s3cr:t").decode()
    assert proxy.headers == {"Proxy-Authorization": f"Basic {expected}"}
    assert "s3cr" not in repr(proxy)
    assert REDACT("password s3cr:t here") == "password *** here"
    assert "s3cr" not in REDACT(proxy.url)


@pytest.mark.parametrize(("url", "words"), [
    ("socks5://proxy:1080", "proxy scheme 'socks5' is not supported"),
    ("https://proxy:3128", "proxy scheme 'https' is not supported"),
    ("http://proxy:3128/path", "without a path"),
    ("http://proxy:99999", "not a port number"),
    ("http://proxy:3128\r\nX-Evil: 1", "control character"),
    ("http://:3128", "names no host"),
])
def test_unusable_proxy_urls_are_refused_saying_why(url: str, words: str) -> None:
    with pytest.raises(ProxyURLInvalid, match=words):
        parse_proxy_url(url)


def test_a_malformed_environment_variable_is_config_invalid_naming_it() -> None:
    creds = Credentials("https://mgmt.example.com:6443")
    with pytest.raises(PermanentError) as caught:
        proxy_settings(creds, {"HTTPS_PROXY": "socks5://proxy:1080"})
    assert caught.value.reason is Reason.ConfigInvalid
    assert "HTTPS_PROXY" in str(caught.value)


def test_the_netbox_client_gets_the_same_choice_as_requests_proxies() -> None:
    assert requests_proxies("https://netbox.example.com", ENV) == {
        "https": "http://proxy.example.com:3128"}
    assert requests_proxies("https://netbox.example.com",
                            {**ENV, "NO_PROXY": "example.com"}) == {}
    assert requests_proxies("http://127.0.0.1:8001", ENV) == {}
