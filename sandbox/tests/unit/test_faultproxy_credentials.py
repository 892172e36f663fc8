"""The fault proxy sends the admin's client certificate upstream only for a caller without
credentials of its own: a server authenticates a client certificate before a bearer token,
so sent along a caller's token it would make every proxied caller the admin (a revoked
node token would still be accepted against a cluster whose admin kubeconfig, like kind's,
holds a client certificate)."""

from __future__ import annotations

import datetime
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from machine_agent_sandbox.apiserver.auth import generate_tls
from machine_agent_sandbox.testkit.certs import key_pem, make_ca, pem
from machine_agent_sandbox.testkit.faultproxy import FaultProxy


class Echo(BaseHTTPRequestHandler):
    """Answers who called: a client certificate's CN and the Authorization header."""

    def do_GET(self) -> None:
        peer = self.connection.getpeercert()
        cn = dict(x[0] for x in peer["subject"]).get("commonName") if peer else None
        body = json.dumps({"cert": cn, "authorization": self.headers.get("Authorization")})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


def client_cert(tmp: Path) -> tuple[str, str, str]:
    """A CA and an admin client certificate it signed: (ca, cert, key) files."""
    now = datetime.datetime.now(datetime.UTC)
    valid = {"not_before": now - datetime.timedelta(minutes=5),
             "not_after": now + datetime.timedelta(days=1)}
    ca = make_ca("client-ca", **valid)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "admin")]))
            .issuer_name(ca.cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(valid["not_before"]).not_valid_after(valid["not_after"])
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca.key, hashes.SHA256()))
    files = (tmp / "client-ca.crt", tmp / "admin.crt", tmp / "admin.key")
    files[0].write_bytes(pem(ca.cert))
    files[1].write_bytes(pem(cert))
    files[2].write_bytes(key_pem(key))
    return str(files[0]), str(files[1]), str(files[2])


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[tuple[str, str, tuple[str, str]]]:
    """An HTTPS server that asks for (and verifies) a client certificate, never requires one."""
    tls = generate_tls(tmp_path / "server", [])
    client_ca, cert, key = client_cert(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=client_ca)
    context.load_cert_chain(tls.cert_path, tls.key_path)
    context.verify_mode = ssl.CERT_OPTIONAL
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", str(tls.ca_path), (cert, key)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_caller_token_goes_upstream_without_the_admin_certificate(
        upstream: tuple[str, str, tuple[str, str]], tmp_path: Path) -> None:
    url, ca, admin_cert = upstream
    with FaultProxy(url, ca, tmp_path / "proxy", admin_cert) as proxy:
        def ask(headers: dict[str, str]) -> dict[str, object]:
            answer = requests.get(f"{proxy.url}/api", headers=headers,
                                  verify=str(proxy.ca_path), timeout=10)
            result: dict[str, object] = answer.json()
            return result
        assert ask({"Authorization": "Bearer node-token"}) == {
            "cert": None, "authorization": "Bearer node-token"}
        assert ask({}) == {"cert": "admin", "authorization": None}
