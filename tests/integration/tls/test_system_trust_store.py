"""Every HTTPS client of the agent trusts the operating system's store when its settings
name no CA: a site CA installed in the image the distribution's way (in
/etc/ssl/certs/ca-certificates.crt, as update-ca-certificates writes it) is trusted by
the management client, NetBox and the CNI download, and the store is found under the
Host's root, never in requests' own certifi bundle.

The servers are small HTTPS servers on 127.0.0.1 (tests/certs.py) with a certificate
from the site CA; the store is a copy of the host's bundle with the site CA appended."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml
from machine_agent_sandbox.testkit.certs import (
    Issuer,
    good_serving_cert,
    https_server,
    make_ca,
    pem,
)

from agent.config.cni import PluginSource
from agent.config.management import ManagementSpec
from agent.errors import AgentError, Reason
from agent.host import Host
from agent.ipam.base import ClaimRequest, PluginEnv, PoolNotFound, open_plugin
from agent.kube.client import Client
from agent.kube.kubeconfig import load_credentials
from agent.kube.workload import KubeconfigCluster
from agent.phases.cni.install import fetch_bundle
from agent.retry import Backoff

STORE = "etc/ssl/certs/ca-certificates.crt"
TOKEN = "node-token-" + "x" * 20
HOST_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


@pytest.fixture
def site_ca() -> Issuer:
    return make_ca("site-ca.example.net")


def node_root(tmp_path: Path, site_ca: Issuer | None) -> Path:
    """A node's root whose system store holds the public CAs, and the site's CA when
    given (installed as on-prem images do)."""
    root = tmp_path / "node"
    (root / STORE).parent.mkdir(parents=True)
    public = HOST_BUNDLE.read_bytes() if HOST_BUNDLE.exists() else b""
    (root / STORE).write_bytes(public + (pem(site_ca.cert) if site_ca else b""))
    (root / "etc/machine-agent").mkdir(parents=True)
    (root / "etc/machine-agent/token").write_text(TOKEN)
    return root


@pytest.fixture(autouse=True)
def no_bundle_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


def management(root: Path, url: str) -> Client:
    creds = load_credentials(ManagementSpec(server=url, token_file="/etc/machine-agent/token"),
                             Host(root))
    return Client(creds, timeout=5, backoff=Backoff(0.01, 0.01, 1), sleep=lambda _: None)


def netbox(root: Path, url: str) -> object:
    host = Host(root)
    host.write_file("/etc/machine-agent/netbox.token", "nbt_" + "t" * 40, mode=0o600)
    return open_plugin("netbox", {"netbox": {
        "url": url, "tokenFile": "/etc/machine-agent/netbox.token", "timeout": "5s",
        "pools": {"v4": {"prefix": "192.0.2.0/24"}}}}, PluginEnv(host))


REQUEST = ClaimRequest(claim_key="uid-1/eth0/ipv4", pool="v4", family="ipv4",
                       interface="eth0", machine_namespace="site-a", machine_name="worker-0",
                       hostname="worker-0.example.net")


def test_a_site_ca_in_the_system_store_is_trusted_by_every_client(
        tmp_path: Path, site_ca: Issuer) -> None:
    root = node_root(tmp_path, site_ca)
    chain, key = good_serving_cert(site_ca, tmp_path)
    with https_server(chain, key) as api:
        assert management(root, api.url).get("/api")["versions"] == ["v1"]
    with https_server(chain, key) as server, pytest.raises(PoolNotFound):
        netbox(root, server.url).claim(REQUEST)  # type: ignore[attr-defined]
    # TLS passed: the plugin asked for its pool, which this server does not know
    assert server.seen and server.seen[0].startswith("Bearer nbt_")
    body = b"not a tar"
    with https_server(chain, key, body=body, content_type="application/gzip") as downloads, \
            pytest.raises(AgentError, match=r"is not a readable tar\.gz"):
        fetch_bundle(Host(root), PluginSource(source="url", url=f"{downloads.url}/cni.tgz",
                                              sha256=hashlib.sha256(body).hexdigest()))
    assert downloads.seen  # the download got through TLS, then the archive was refused
    workload = root / "etc/kubernetes/admin.conf"
    workload.parent.mkdir(parents=True)
    with https_server(chain, key) as cluster:
        workload.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "w", "cluster": {"server": cluster.url}}],
            "users": [{"name": "u", "user": {"token": TOKEN}}],
            "contexts": [{"name": "c", "context": {"cluster": "w", "user": "u"}}]}))
        client = KubeconfigCluster(Host(root), "/etc/kubernetes/admin.conf",
                                   reason=Reason.APIServerUnreachable, missing_hint="")
        assert client.verify == str(root / STORE)
        # the test server answers every GET with APIVersions: through TLS, read as JSON
        assert client.node("node-0") == {"kind": "APIVersions", "versions": ["v1"]}
    assert cluster.seen == [f"Bearer {TOKEN}"]


def test_without_the_site_ca_each_client_refuses_and_names_the_system_store(
        tmp_path: Path, site_ca: Issuer) -> None:
    root = node_root(tmp_path, None)  # the public CAs only
    chain, key = good_serving_cert(site_ca, tmp_path)
    store = re.escape(str(root / STORE))
    with https_server(chain, key) as api, pytest.raises(AgentError) as caught:
        management(root, api.url).get("/api")
    assert re.search(rf"not signed by a CA this node trusts \({store}\)", str(caught.value))
    assert api.seen == []  # refused in the handshake: the token never left
    with https_server(chain, key) as server, pytest.raises(AgentError) as caught:
        netbox(root, server.url).claim(REQUEST)  # type: ignore[attr-defined]
    assert re.search(rf"not signed by a CA this node trusts \({store}\)", str(caught.value))
    assert "install it in the system's trust store" in (caught.value.hint or "")
    with https_server(chain, key, content_type="application/gzip") as downloads, \
            pytest.raises(AgentError) as caught:
        fetch_bundle(Host(root), PluginSource(source="url", url=f"{downloads.url}/cni.tgz",
                                              sha256="0" * 64))
    assert re.search(rf"not signed by a CA this node trusts \({store}\)", str(caught.value))
