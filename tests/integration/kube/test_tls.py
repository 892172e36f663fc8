"""TLS to the management API: a server whose certificate is not the one the node can
trust is refused before a request (and its token) is sent, with a message that names the
server, says what is wrong with the certificate, and how to fix it.

Certificates are made here with `cryptography`; the server is a small HTTPS server on
127.0.0.1; the client is the agent's own, built from a kubeconfig the way a node does."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import re
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agent.config.management import ManagementSpec
from agent.errors import Reason
from agent.host import Host
from agent.kube.client import Client
from agent.kube.errors import Unreachable
from agent.kube.kubeconfig import load_credentials
from agent.retry import Backoff

TOKEN = "node-token-" + "x" * 20
NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)
LOOPBACK: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]


@dataclass
class Issuer:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(cn: str) -> Issuer:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(NOW - DAY).not_valid_after(NOW + 30 * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return Issuer(cert, key)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def serving_cert(issuer: Issuer, tmp: Path, *, names: list[x509.GeneralName],
                 not_before: datetime.datetime, not_after: datetime.datetime
                 ) -> tuple[Path, Path]:
    """A server certificate (chain file with the issuer) and its key, as files."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name("kube-apiserver"))
            .issuer_name(issuer.cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before).not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .sign(issuer.key, hashes.SHA256()))
    chain, key_file = tmp / "server.crt", tmp / "server.key"
    chain.write_bytes(_pem(cert) + _pem(issuer.cert))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return chain, key_file


class _Api(BaseHTTPRequestHandler):
    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization", ""))
        body = b'{"kind": "APIVersions", "versions": ["v1"]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass
class HttpsServer:
    url: str
    seen: list[str]


@contextmanager
def https_server(chain: Path, key: Path) -> Iterator[HttpsServer]:
    """An HTTPS server on 127.0.0.1 (a free port) presenting `chain`."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(chain, key)
    seen: list[str] = []
    handler = type("Handler", (_Api,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield HttpsServer(f"https://127.0.0.1:{server.server_address[1]}", seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def node_client(root: Path, server: str, ca: Issuer) -> Client:
    """The agent's client as a node builds it: from a kubeconfig trusting `ca`."""
    host = Host(root)
    host.write_file("/etc/machine-agent/management.kubeconfig", yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "node",
        "clusters": [{"name": "mgmt", "cluster": {
            "server": server,
            "certificate-authority-data": base64.b64encode(_pem(ca.cert)).decode()}}],
        "users": [{"name": "node", "user": {"token": TOKEN}}],
        "contexts": [{"name": "node", "context": {"cluster": "mgmt", "user": "node"}}]}),
        mode=0o600)
    creds = load_credentials(
        ManagementSpec(kubeconfig="/etc/machine-agent/management.kubeconfig"), host)
    return Client(creds, timeout=5, backoff=Backoff(0.01, 0.01, 2), sleep=lambda _: None)


@pytest.fixture
def trusted() -> Issuer:
    """The management cluster's CA, the one the node's kubeconfig names."""
    return make_ca("kubernetes")


def test_a_certificate_from_the_configured_ca_for_the_address_is_accepted(
        trusted: Issuer, tmp_path: Path) -> None:
    chain, key = serving_cert(trusted, tmp_path, names=LOOPBACK,
                              not_before=NOW - DAY, not_after=NOW + DAY)
    with https_server(chain, key) as api:
        assert node_client(tmp_path / "node", api.url, trusted).get("/api")["versions"] == ["v1"]
    assert api.seen == [f"Bearer {TOKEN}"]


Case = tuple[str, list[x509.GeneralName], tuple[datetime.datetime, datetime.datetime],
             str, str]
CASES: dict[str, Case] = {
    # name: (issuer: "" the trusted CA, else a new CA of that name; subjectAltNames;
    #        validity; what the message says; what the hint says)
    "another-ca": ("etcd-ca", LOOPBACK, (NOW - DAY, NOW + DAY),
                   r"not signed by a CA this node trusts \(.*/run/machine-agent/kube/ca\.crt\)",
                   "certificate-authority-data"),
    # A regenerated cluster: a CA of the same name, with another key.
    "another-ca-same-name": ("kubernetes", LOOPBACK, (NOW - DAY, NOW + DAY),
                   r"not signed by a CA this node trusts \(.*/run/machine-agent/kube/ca\.crt\)",
                   "certificate-authority-data"),
    "another-host-name": ("", [x509.DNSName("mgmt.example.org")], (NOW - DAY, NOW + DAY),
                          r"certificate is not valid for '127\.0\.0\.1'",
                          "subjectAltName"),
    "expired": ("", LOOPBACK, (NOW - 3 * DAY, NOW - DAY),
                r"certificate has expired", "clock"),
    "not-yet-valid": ("", LOOPBACK, (NOW + DAY, NOW + 3 * DAY),
                      r"certificate is not valid yet", "clock"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_server_certificate_is_refused_saying_what_is_wrong_and_the_fix(
        case: str, trusted: Issuer, tmp_path: Path) -> None:
    other_ca, names, (not_before, not_after), says, fix = CASES[case]
    issuer = make_ca(other_ca) if other_ca else trusted
    chain, key = serving_cert(issuer, tmp_path, names=names, not_before=not_before,
                              not_after=not_after)
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
