"""Who is calling: bearer tokens mapped to users and groups, and the generated TLS
material (a CA, and a serving certificate for 127.0.0.1, localhost and extra IPs)."""

from __future__ import annotations

import datetime
import ipaddress
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from machine_agent_sandbox.files import write_atomic

ADMIN_USER = "kubernetes-admin"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
ANONYMOUS = "system:anonymous"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]
    uid: str = ""

    @property
    def is_admin(self) -> bool:
        return MASTERS in self.groups


ANONYMOUS_USER = User(ANONYMOUS, ("system:unauthenticated",))


def service_account_user(namespace: str, name: str) -> User:
    return User(f"system:serviceaccount:{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED))


class Tokens:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: dict[str, User] = {}

    def issue(self, user: str, groups: tuple[str, ...] | list[str] = (), uid: str = "") -> str:
        token = secrets.token_urlsafe(32)
        all_groups = tuple(dict.fromkeys([*groups, AUTHENTICATED]))
        with self._lock:
            self._users[token] = User(user, all_groups, uid)
        return token

    def issue_for(self, who: User) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._users[token] = who
        return token

    def revoke(self, token: str) -> None:
        with self._lock:
            self._users.pop(token, None)

    def user(self, token: str) -> User | None:
        with self._lock:
            return self._users.get(token)


@dataclass(frozen=True)
class TlsFiles:
    ca_pem: str
    ca_path: Path
    cert_path: Path
    key_path: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def generate_tls(directory: Path, extra_ips: list[str]) -> TlsFiles:
    """A fresh CA and serving certificate, written as PEM files into `directory`."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder().subject_name(_name("machine-agent-sandbox-ca"))
        .issuer_name(_name("machine-agent-sandbox-ca")).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True,
            content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    ips = {"127.0.0.1", "::1", *extra_ips}
    san: list[x509.GeneralName] = [x509.DNSName(n) for n in (
        "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")]
    san += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in sorted(ips)]
    cert = (
        x509.CertificateBuilder().subject_name(_name("kube-apiserver"))
        .issuer_name(ca_cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                       critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM).decode()
    files = TlsFiles(ca_pem, directory / "ca.crt", directory / "apiserver.crt",
                     directory / "apiserver.key")
    write_atomic(files.ca_path, ca_pem)
    write_atomic(files.cert_path, cert.public_bytes(serialization.Encoding.PEM))
    write_atomic(files.key_path, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()), mode=0o600)
    return files
