"""TLS to Nautobot, through the client it shares with the NetBox plugin: a certificate from
the configured CA is accepted and the token sent; one the node cannot trust is refused in
the handshake (no token sent, nothing claimed), the message naming Nautobot's settings.
The server is the test kit's HTTPS server on 127.0.0.1, not the real Nautobot."""

from __future__ import annotations

from pathlib import Path

import pytest
from machine_agent_sandbox.testkit.certs import (
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

TOKEN = "0123456789abcdef0123456789abcdef01234567"
TOKEN_FILE = "/etc/machine-agent/nautobot.token"
CA_FILE = "/etc/machine-agent/nautobot-ca.crt"
REQUEST = ClaimRequest(claim_key="uid-1/eth0/ipv4", pool="v4", family="ipv4",
                       interface="eth0", machine_namespace="site-a", machine_name="worker-0")


def nautobot_plugin(root: Path, url: str, ca: Issuer | None) -> IPAMPlugin:
    host = Host(root)
    host.write_file(TOKEN_FILE, TOKEN + "\n", mode=0o600)
    settings = {"url": url, "tokenFile": TOKEN_FILE, "timeout": "5s",
                "pools": {"v4": {"prefix": "192.0.2.0/24"}}}
    if ca is not None:
        host.write_file(CA_FILE, pem(ca.cert).decode())
        settings["caFile"] = CA_FILE
    return open_plugin("nautobot", {"nautobot": settings}, PluginEnv(host))


def test_a_certificate_from_the_configured_ca_is_accepted(tmp_path: Path) -> None:
    trusted = make_ca("nautobot-ca")
    chain, key = good_serving_cert(trusted, tmp_path)
    # The server knows no prefix: TLS passed and the plugin asked for the pool.
    with https_server(chain, key, body=b'{"count": 0, "results": []}') as nautobot, \
            pytest.raises(PoolNotFound):
        nautobot_plugin(tmp_path / "node", nautobot.url, trusted).claim(REQUEST)
    assert nautobot.seen == [f"Token {TOKEN}"]


@pytest.mark.parametrize(("case", "fix"), [
    ("another-ca", "spec.ipam.plugins.nautobot.caFile"),
    ("another-host-name", "spec.ipam.plugins.nautobot.url"),
])
def test_an_untrusted_certificate_is_refused_naming_nautobots_setting(
        case: str, fix: str, tmp_path: Path) -> None:
    trusted = make_ca("nautobot-ca")
    chain, key = bad_serving_cert(case, trusted, tmp_path)
    with https_server(chain, key) as nautobot, pytest.raises(IPAMUnavailable) as caught:
        nautobot_plugin(tmp_path / "node", nautobot.url, trusted).claim(REQUEST)
    err = caught.value
    assert err.reason is Reason.IPAMUnavailable and err.temporary
    assert err.message.startswith(
        f"nautobot: TLS verification of {nautobot.url} failed: the server's certificate"), \
        err.message
    assert fix in (err.hint or ""), err.hint
    assert TOKEN not in str(err)
    assert nautobot.seen == []  # refused in the handshake: no request, no token
