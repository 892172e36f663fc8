"""TLS to the management API: a server whose certificate is not the one the node can
trust is refused before a request (and its token) is sent, with a message that names the
server, says what is wrong with the certificate, and how to fix it.

Certificates are made with `cryptography` and the server is a small HTTPS server on
127.0.0.1 (the test kit's certs.py, shared with the NetBox and CNI download tests); the client
is the agent's own, built from a kubeconfig the way a node does."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
import yaml
from machine_agent_sandbox.testkit.certs import (
    BAD_CERTS,
    Issuer,
    bad_serving_cert,
    good_serving_cert,
    https_server,
    make_ca,
    pem,
)

from agent.config.management import ManagementSpec
from agent.errors import Reason, TemporaryError
from agent.host import Host
from agent.kube.client import Client
from agent.kube.errors import Unreachable
from agent.kube.kubeconfig import load_credentials
from agent.kube.workload import KubeconfigCluster
from agent.retry import Backoff

TOKEN = "node-token-" + "x" * 20


def write_kubeconfig(host: Host, path: str, server: str, ca: Issuer) -> None:
    """A kubeconfig for `server` trusting `ca`, with a token."""
    host.write_file(path, yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "node",
        "clusters": [{"name": "mgmt", "cluster": {
            "server": server,
            "certificate-authority-data": base64.b64encode(pem(ca.cert)).decode()}}],
        "users": [{"name": "node", "user": {"token": TOKEN}}],
        "contexts": [{"name": "node", "context": {"cluster": "mgmt", "user": "node"}}]}),
        mode=0o600)


def node_client(root: Path, server: str, ca: Issuer) -> Client:
    """The agent's client as a node builds it: from a kubeconfig trusting `ca`."""
    host = Host(root)
    write_kubeconfig(host, "/etc/machine-agent/management.kubeconfig", server, ca)
    creds = load_credentials(
        ManagementSpec(kubeconfig="/etc/machine-agent/management.kubeconfig"), host)
    return Client(creds, timeout=5, backoff=Backoff(0.01, 0.01, 2), sleep=lambda _: None)


@pytest.fixture
def trusted() -> Issuer:
    """The management cluster's CA, the one the node's kubeconfig names."""
    return make_ca("kubernetes")


def test_a_certificate_from_the_configured_ca_for_the_address_is_accepted(
        trusted: Issuer, tmp_path: Path) -> None:
    chain, key = good_serving_cert(trusted, tmp_path)
    with https_server(chain, key) as api:
        assert node_client(tmp_path / "node", api.url, trusted).get("/api")["versions"] == ["v1"]
    assert api.seen == [f"Bearer {TOKEN}"]


CASES: dict[str, tuple[str, str]] = {
    # testkit.certs.BAD_CERTS case: (what the message says, what the hint says)
    "another-ca": (r"not signed by a CA this node trusts \(.*/run/machine-agent/kube/ca\.crt\)",
                   "certificate-authority-data"),
    "another-ca-same-name": (
        r"not signed by a CA this node trusts \(.*/run/machine-agent/kube/ca\.crt\)",
        "certificate-authority-data"),
    "another-host-name": (r"certificate is not valid for '127\.0\.0\.1'", "subjectAltName"),
    "expired": (r"certificate has expired", "clock"),
    "not-yet-valid": (r"certificate is not valid yet", "clock"),
}


@pytest.mark.parametrize("case", list(BAD_CERTS))
def test_a_bad_server_certificate_is_refused_saying_what_is_wrong_and_the_fix(
        case: str, trusted: Issuer, tmp_path: Path) -> None:
    says, fix = CASES[case]
    chain, key = bad_serving_cert(case, trusted, tmp_path)
    with https_server(chain, key) as api:
        client = node_client(tmp_path / "node", api.url, trusted)
        with pytest.raises(Unreachable) as caught:
            client.get("/api/v1/namespaces/default/secrets/worker-0-bootstrap")
    err = caught.value
    assert err.reason is Reason.ManagementUnreachable
    message = str(err)
    assert message.startswith(
        f"GET /api/v1/namespaces/default/secrets/worker-0-bootstrap: TLS verification of "
        f"{api.url} failed: the server's certificate")
    assert re.search(says, message), message
    assert fix in (err.hint or ""), err.hint
    assert "Traceback" not in message and "_ssl.c" not in message
    assert TOKEN not in message
    # Refused in the handshake: no request, so no token, reached the server.
    assert api.seen == []


WORKLOAD_CA = r"not signed by a CA this node trusts \(.*/run/machine-agent/workload/admin\.conf/"
WORKLOAD_CASES: dict[str, tuple[str, str]] = {
    # testkit.certs.BAD_CERTS case: (what the message says, what the hint says)
    "another-ca": (WORKLOAD_CA + r"ca\.crt\)",
                   "/etc/kubernetes/admin.conf must hold the workload cluster's CA"),
    "another-ca-same-name": (WORKLOAD_CA + r"ca\.crt\)",
                             "/etc/kubernetes/admin.conf must hold the workload cluster's CA"),
    "another-host-name": (r"certificate is not valid for '127\.0\.0\.1'",
                          "the server in /etc/kubernetes/admin.conf must name"),
    "expired": (r"certificate has expired", "clock"),
    "not-yet-valid": (r"certificate is not valid yet", "clock"),
}


def pin(ca: Issuer) -> str:
    from cryptography.hazmat.primitives import serialization
    from machine_agent_sandbox.kubeadm.cluster_info import spki_pin

    return spki_pin(ca.cert.public_bytes(serialization.Encoding.PEM).decode())


def workload_cluster(root: Path, server: str, ca: Issuer) -> KubeconfigCluster:
    """The workload client as the CNI phase builds it, from kubeadm's admin.conf."""
    host = Host(root)
    write_kubeconfig(host, "/etc/kubernetes/admin.conf", server, ca)
    return KubeconfigCluster(host, "/etc/kubernetes/admin.conf", reason=Reason.CNIBroken,
                             missing_hint="join first")


def test_the_workload_client_accepts_the_configured_ca_for_the_address(
        trusted: Issuer, tmp_path: Path) -> None:
    with https_server(*good_serving_cert(trusted, tmp_path)) as api:
        assert workload_cluster(tmp_path / "node", api.url, trusted).node("worker-0")
    assert api.seen == [f"Bearer {TOKEN}"]


@pytest.mark.parametrize("case", list(BAD_CERTS))
def test_the_workload_client_refuses_a_bad_certificate_saying_what_is_wrong_and_the_fix(
        case: str, trusted: Issuer, tmp_path: Path) -> None:
    says, fix = WORKLOAD_CASES[case]
    with https_server(*bad_serving_cert(case, trusted, tmp_path)) as api:
        cluster = workload_cluster(tmp_path / "node", api.url, trusted)
        with pytest.raises(TemporaryError) as caught:
            cluster.node("worker-0")
    err = caught.value
    # the server answered: not unreachable, but refused, with the kubeconfig's CA named
    # by its pin (kubeadm's caCertHashes form) to compare with the cluster's
    assert err.reason is Reason.APIServerUntrusted
    assert f"the CA it holds has the pin {pin(trusted)}" in (err.hint or "") or \
        case not in ("another-ca", "another-ca-same-name"), err.hint
    assert err.message.startswith(
        f"TLS verification of the workload API server {api.url} failed: the server's "
        f"certificate"), err.message
    assert re.search(says, err.message), err.message
    assert fix in (err.hint or ""), err.hint
    assert "_ssl.c" not in str(err) and TOKEN not in str(err)
    assert api.seen == []
