"""TLS to NetBox: a server whose certificate the node cannot trust is refused in the
handshake, before a request (and the token) is sent, so nothing is claimed; the message
names the server, says what is wrong with the certificate and the fix in the plugin's
settings. The server is a small HTTPS server on 127.0.0.1 (the test kit's certs.py), not the real
NetBox: a refusal never gets as far as NetBox's API."""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from machine_agent_sandbox.testkit.certs import (
    BAD_CERTS,
    Issuer,
    bad_serving_cert,
    good_serving_cert,
    https_server,
    make_ca,
    pem,
)

from agent.errors import Reason
from agent.host import Host
from agent.ipam.base import (
    ClaimRequest,
    IPAMPlugin,
    IPAMUnavailable,
    PluginEnv,
    PoolNotFound,
    open_plugin,
)

TOKEN = "nbt_" + "t" * 40
TOKEN_FILE = "/etc/machine-agent/netbox.token"
CA_FILE = "/etc/machine-agent/netbox-ca.crt"
REQUEST = ClaimRequest(claim_key="uid-1/eth0/ipv4", pool="v4", family="ipv4",
                       interface="eth0", machine_namespace="site-a", machine_name="worker-0",
                       hostname="worker-0.example.net")


def netbox_plugin(root: Path, url: str, ca: Issuer | None) -> IPAMPlugin:
    """The plugin as the agent opens it, with `ca` as spec.ipam.plugins.netbox.caFile."""
    host = Host(root)
    host.write_file(TOKEN_FILE, TOKEN + "\n", mode=0o600)
    settings = {"url": url, "tokenFile": TOKEN_FILE, "timeout": "5s",
                "pools": {"v4": {"prefix": "192.0.2.0/24"}}}
    if ca is not None:
        host.write_file(CA_FILE, pem(ca.cert).decode())
        settings["caFile"] = CA_FILE
    return open_plugin("netbox", {"netbox": settings}, PluginEnv(host))


@pytest.fixture
def trusted() -> Issuer:
    """NetBox's CA, the one caFile holds."""
    return make_ca("netbox-ca")


def test_a_certificate_from_the_configured_ca_for_the_address_is_accepted(
        trusted: Issuer, tmp_path: Path) -> None:
    chain, key = good_serving_cert(trusted, tmp_path)
    # The server knows no prefix: TLS passed and the plugin asked for the pool.
    with https_server(chain, key) as netbox, pytest.raises(PoolNotFound):
        netbox_plugin(tmp_path / "node", netbox.url, trusted).claim(REQUEST)
    assert netbox.seen == [f"Bearer {TOKEN}"]


CASES: dict[str, tuple[str, str]] = {
    # testkit.certs.BAD_CERTS case: (what the message says, what the hint says)
    "another-ca": (r"not signed by a CA this node trusts \(.*/etc/machine-agent/netbox-ca\.crt\)",
                   "spec.ipam.plugins.netbox.caFile"),
    "another-ca-same-name": (
        r"not signed by a CA this node trusts \(.*/etc/machine-agent/netbox-ca\.crt\)",
        "spec.ipam.plugins.netbox.caFile"),
    "another-host-name": (r"certificate is not valid for '127\.0\.0\.1'",
                          "spec.ipam.plugins.netbox.url must name the server by a host name "
                          "or address its certificate lists in subjectAltName"),
    "expired": (r"certificate has expired", "this node's clock is wrong"),
    "not-yet-valid": (r"certificate is not valid yet", "this node's clock is wrong"),
}


def refused(plugin: IPAMPlugin, url: str) -> IPAMUnavailable:
    """The refusal of a claim, checked for what every TLS refusal says."""
    with pytest.raises(IPAMUnavailable) as caught:
        plugin.claim(REQUEST)
    err = caught.value
    assert err.reason is Reason.IPAMUnavailable
    assert err.message.startswith(
        f"netbox: TLS verification of {url} failed: the server's certificate"), err.message
    assert "Traceback" not in str(err) and "_ssl.c" not in str(err)
    assert TOKEN not in str(err)
    return err


@pytest.mark.parametrize("case", list(BAD_CERTS))
def test_a_bad_server_certificate_is_refused_saying_what_is_wrong_and_the_fix(
        case: str, trusted: Issuer, tmp_path: Path) -> None:
    says, fix = CASES[case]
    chain, key = bad_serving_cert(case, trusted, tmp_path)
    with https_server(chain, key) as netbox:
        err = refused(netbox_plugin(tmp_path / "node", netbox.url, trusted), netbox.url)
    assert re.search(says, err.message), err.message
    assert fix in (err.hint or ""), err.hint
    # Refused in the handshake: no request, so no token and no claim, reached NetBox.
    assert netbox.seen == []


def test_without_ca_file_the_default_bundle_is_named_and_ca_file_is_the_fix(
        trusted: Issuer, tmp_path: Path) -> None:
    chain, key = good_serving_cert(trusted, tmp_path)
    with https_server(chain, key) as netbox:
        err = refused(netbox_plugin(tmp_path / "node", netbox.url, None), netbox.url)
    assert re.search(r"not signed by a CA this node trusts \(/.*\.pem\)", err.message), \
        err.message
    assert err.hint == ("give NetBox's CA in spec.ipam.plugins.netbox.caFile, or install "
                        "it in the system's trust store")
    assert netbox.seen == []


def test_a_plain_http_server_at_an_https_url_is_a_failed_handshake_naming_the_url_setting(
        trusted: Issuer, tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"https://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(IPAMUnavailable) as caught:
            netbox_plugin(tmp_path / "node", url, trusted).claim(REQUEST)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    err = caught.value
    assert err.message.startswith(
        f"netbox: TLS verification of {url} failed: the TLS handshake failed: "), err.message
    assert "_ssl.c" not in str(err) and TOKEN not in str(err)
    assert err.hint == "spec.ipam.plugins.netbox.url must name the server's HTTPS endpoint"
