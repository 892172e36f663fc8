"""kubeconfig's `tls-server-name`: a server reached at an address its certificate does not
name (through a relay or a load balancer) is verified against the given name instead."""

from __future__ import annotations

import datetime
import http.server
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agent.config.management import ManagementSpec
from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.kube.client import Client
from agent.kube.errors import Unreachable
from agent.kube.kubeconfig import Credentials, load_credentials
from agent.retry import Backoff

NAME = "api.mgmt.example"
"""The only name the test server's certificate holds (not 127.0.0.1, where it listens)."""


def _cert(subject: str, issuer: x509.Name | None, key: ec.EllipticCurvePrivateKey,
          signer: ec.EllipticCurvePrivateKey, public: ec.EllipticCurvePublicKey,
          *, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name)
               .public_key(public).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(hours=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(NAME)]),
                                        critical=False)
    return builder.sign(signer, hashes.SHA256())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTPS server on 127.0.0.1 whose certificate names only NAME; (URL, CA file)."""
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
        ec.SECP256R1())
    ca = _cert("test-ca", None, ca_key, ca_key, ca_key.public_key(), ca=True)
    leaf = _cert(NAME, ca.subject, key, ca_key, key.public_key(), ca=False)
    pem = serialization.Encoding.PEM
    (tmp_path / "ca.crt").write_bytes(ca.public_bytes(pem))
    (tmp_path / "tls.crt").write_bytes(leaf.public_bytes(pem))
    (tmp_path / "tls.key").write_bytes(key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"kind": "Machine"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}", tmp_path / "ca.crt"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def get(url: str, ca: Path, server_name: str | None) -> object:
    creds = Credentials(url, token="t0ken", ca_file=str(ca), tls_server_name=server_name)
    return Client(creds, timeout=5.0, backoff=Backoff(0.01, 0.01, 1)).get("/x")


def test_the_certificate_is_verified_against_tls_server_name(
        server: tuple[str, Path]) -> None:
    url, ca = server
    assert get(url, ca, NAME) == {"kind": "Machine"}


def test_without_it_or_with_another_name_verification_fails(
        server: tuple[str, Path]) -> None:
    url, ca = server
    for name in (None, "other.mgmt.example"):
        with pytest.raises(Unreachable, match=r"TLS verification of .* failed"):
            get(url, ca, name)


def test_kubeconfig_tls_server_name_is_read_and_checked(tmp_path: Path) -> None:
    def load(name: str) -> Credentials:
        (tmp_path / "kubeconfig").write_text(f"""apiVersion: v1
kind: Config
current-context: node
clusters:
- name: mgmt
  cluster: {{server: "https://198.51.100.1:6443", tls-server-name: "{name}"}}
users:
- name: node
  user: {{token: abc}}
contexts:
- name: node
  context: {{cluster: mgmt, user: node}}
""")
        return load_credentials(ManagementSpec(kubeconfig="/kubeconfig"), Host(tmp_path))

    assert load(NAME).tls_server_name == NAME
    assert load("127.0.0.1").tls_server_name == "127.0.0.1"
    with pytest.raises(PermanentError, match=r"tls-server-name: .* not a valid host name") as err:
        load("api.example\\nextra")
    assert err.value.reason == Reason.ConfigInvalid
