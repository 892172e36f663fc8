"""Reaching the management cluster through a real HTTP proxy (proxy.py, from PyPI, on
127.0.0.1): a kubeconfig's proxy-url tunnels every request with CONNECT, the server's
certificate is still verified end to end, proxy credentials go only to the proxy, and a
proxy that refuses is reported without them."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
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

from agent.config.management import ManagementSpec
from agent.host import Host
from agent.kube.client import Client
from agent.kube.errors import Unreachable
from agent.kube.kubeconfig import load_credentials
from agent.retry import Backoff

pytestmark = pytest.mark.allow_processes  # the real proxy runs as its own process

TOKEN = "node-token-" + "p" * 20
PROXY_USER, PROXY_PASSWORD = "node", "proxy-pass-9f3k"


@dataclass
class RealProxy:
    port: int
    log: Path

    def connects(self) -> list[str]:
        return [line for line in self.log.read_text(errors="replace").splitlines()
                if "CONNECT" in line]


@pytest.fixture
def real_proxy(tmp_path: Path) -> Iterator[RealProxy]:
    """proxy.py with basic auth, its own process group (killed whole at the end)."""
    port_file, log = tmp_path / "proxy.port", tmp_path / "proxy.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy", "--hostname", "127.0.0.1", "--port", "0",
         "--port-file", str(port_file), "--num-workers", "1", "--num-acceptors", "1",
         "--basic-auth", f"{PROXY_USER}:{PROXY_PASSWORD}", "--log-file", str(log),
         "--log-level", "INFO"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        port = 0
        while time.monotonic() < deadline and proc.poll() is None:
            text = port_file.read_text().strip() if port_file.exists() else ""
            if text.isdigit():
                port = int(text)
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
            time.sleep(0.1)
        else:
            raise AssertionError(f"proxy.py did not start: {log.read_text(errors='replace')}"
                                 if log.exists() else "proxy.py did not start")
        yield RealProxy(port, log)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def node_client(root: Path, server: str, ca: Issuer, proxy_url: str) -> Client:
    host = Host(root)
    host.write_file("/etc/machine-agent/management.kubeconfig", yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "node",
        "clusters": [{"name": "mgmt", "cluster": {
            "server": server, "proxy-url": proxy_url,
            "certificate-authority-data": base64.b64encode(pem(ca.cert)).decode()}}],
        "users": [{"name": "node", "user": {"token": TOKEN}}],
        "contexts": [{"name": "node", "context": {"cluster": "mgmt", "user": "node"}}]}),
        mode=0o600)
    creds = load_credentials(
        ManagementSpec(kubeconfig="/etc/machine-agent/management.kubeconfig"), host)
    return Client(creds, timeout=5, backoff=Backoff(0.01, 0.01, 2), sleep=lambda _: None)


@pytest.fixture
def trusted() -> Issuer:
    return make_ca("kubernetes")


def test_a_kubeconfigs_proxy_url_tunnels_requests_and_tls_is_still_verified(
        real_proxy: RealProxy, trusted: Issuer, tmp_path: Path) -> None:
    proxy_url = f"http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:{real_proxy.port}"
    with https_server(*good_serving_cert(trusted, tmp_path)) as api:
        client = node_client(tmp_path / "node", api.url, trusted, proxy_url)
        assert client.get("/api")["versions"] == ["v1"]
        assert client.get("/api")["versions"] == ["v1"]  # the tunnel is kept alive
    api_port = api.url.rsplit(":", 1)[1]
    connects = real_proxy.connects()
    assert connects and all(f"127.0.0.1:{api_port}" in line for line in connects), connects
    # The token travelled inside the tunnel to the server, not to the proxy.
    assert api.seen == [f"Bearer {TOKEN}"] * 2


def test_a_proxy_refusing_the_credentials_is_reported_without_them(
        real_proxy: RealProxy, trusted: Issuer, tmp_path: Path) -> None:
    proxy_url = f"http://{PROXY_USER}:wrong-password-x1@127.0.0.1:{real_proxy.port}"
    with https_server(*good_serving_cert(trusted, tmp_path)) as api:
        client = node_client(tmp_path / "node", api.url, trusted, proxy_url)
        with pytest.raises(Unreachable) as caught:
            client.get("/api")
    message = f"{caught.value} {caught.value.hint or ''}"
    assert "407" in message, message
    assert "wrong-password-x1" not in message and TOKEN not in message
    assert api.seen == []  # nothing reached the server


def test_a_proxy_from_the_environment_is_not_used_for_a_loopback_server_as_in_go(
        real_proxy: RealProxy, trusted: Issuer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{real_proxy.port}")
    with https_server(*good_serving_cert(trusted, tmp_path)) as api:
        host = Host(tmp_path / "node")
        host.write_file("/etc/machine-agent/token", TOKEN, mode=0o600)
        host.write_file("/etc/machine-agent/ca.crt", pem(trusted.cert).decode())
        creds = load_credentials(ManagementSpec(
            server=api.url, token_file="/etc/machine-agent/token",
            ca_file="/etc/machine-agent/ca.crt"), host)
        assert Client(creds, timeout=5).get("/api")["versions"] == ["v1"]
    assert real_proxy.connects() == []
    assert api.seen == [f"Bearer {TOKEN}"]
