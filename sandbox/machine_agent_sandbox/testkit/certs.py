"""The one set of certificate helpers: CAs and serving certificates made with
`cryptography` (the API stand-in's own TLS, the tests' trusted and bad servers), and an
HTTPS server on 127.0.0.1 presenting them, for the TLS tests of every HTTPS client of the
agent (management API, NetBox, CNI downloads)."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)
LOOPBACK: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
API_VERSIONS = b'{"kind": "APIVersions", "versions": ["v1"]}'


@dataclass
class Issuer:
    cn: str
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(cn: str, *, not_before: datetime.datetime | None = None,
            not_after: datetime.datetime | None = None) -> Issuer:
    """A CA (valid from a day ago for 30 days unless given), allowed to sign certificates."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(not_before or NOW - DAY)
            .not_valid_after(not_after or NOW + 30 * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return Issuer(cn, cert, key)


def issue(issuer: Issuer, cn: str, *, names: list[x509.GeneralName],
          not_before: datetime.datetime, not_after: datetime.datetime
          ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A TLS server certificate for `names`, signed by `issuer`, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(cn))
            .issuer_name(issuer.cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before).not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                issuer.key.public_key()), critical=False)
            .sign(issuer.key, hashes.SHA256()))
    return cert, key


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def serving_cert(issuer: Issuer, tmp: Path, *, names: list[x509.GeneralName],
                 not_before: datetime.datetime, not_after: datetime.datetime
                 ) -> tuple[Path, Path]:
    """A server certificate (chain file with the issuer) and its key, as files."""
    cert, key = issue(issuer, "server", names=names, not_before=not_before,
                      not_after=not_after)
    chain, key_file = tmp / "server.crt", tmp / "server.key"
    chain.write_bytes(pem(cert) + pem(issuer.cert))
    key_file.write_bytes(key_pem(key))
    return chain, key_file


@dataclass(frozen=True)
class BadCert:
    issuer: str
    """`trusted`: the trusted CA; `other`: another CA; `same-name`: another CA with the
    trusted one's name and another key (a regenerated cluster)."""
    names: list[x509.GeneralName]
    not_before: datetime.datetime
    not_after: datetime.datetime


BAD_CERTS: dict[str, BadCert] = {
    "another-ca": BadCert("other", LOOPBACK, NOW - DAY, NOW + DAY),
    "another-ca-same-name": BadCert("same-name", LOOPBACK, NOW - DAY, NOW + DAY),
    "another-host-name": BadCert("trusted", [x509.DNSName("server.example.org")],
                                 NOW - DAY, NOW + DAY),
    "expired": BadCert("trusted", LOOPBACK, NOW - 3 * DAY, NOW - DAY),
    "not-yet-valid": BadCert("trusted", LOOPBACK, NOW + DAY, NOW + 3 * DAY),
}
"""Server certificates a client trusting only `trusted` for 127.0.0.1 must refuse."""


def bad_serving_cert(case: str, trusted: Issuer, tmp: Path) -> tuple[Path, Path]:
    bad = BAD_CERTS[case]
    issuer = {"trusted": trusted, "other": make_ca("another-ca"),
              "same-name": make_ca(trusted.cn)}[bad.issuer]
    return serving_cert(issuer, tmp, names=bad.names, not_before=bad.not_before,
                        not_after=bad.not_after)


def good_serving_cert(trusted: Issuer, tmp: Path) -> tuple[Path, Path]:
    """A certificate from `trusted` for 127.0.0.1, valid now: the control case."""
    return serving_cert(trusted, tmp, names=LOOPBACK, not_before=NOW - DAY,
                        not_after=NOW + DAY)


class _Handler(BaseHTTPRequestHandler):
    seen: list[str]
    body: bytes
    content_type: str

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization", ""))
        self.send_response(200)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass
class HttpsServer:
    url: str
    seen: list[str]
    """The Authorization header of every request that reached the server ("" if none)."""


@contextmanager
def https_server(chain: Path, key: Path, *, body: bytes = API_VERSIONS,
                 content_type: str = "application/json") -> Iterator[HttpsServer]:
    """An HTTPS server on 127.0.0.1 (a free port) presenting `chain`, answering every
    GET with `body`."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(chain, key)
    seen: list[str] = []
    handler = type("Handler", (_Handler,),
                   {"seen": seen, "body": body, "content_type": content_type})
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
