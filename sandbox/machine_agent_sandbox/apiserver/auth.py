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

from machine_agent_sandbox.testkit.certs import issue, key_pem, make_ca, pem

ADMIN_USER = "kubernetes-admin"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
ANONYMOUS = "system:anonymous"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]

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

    def issue(self, user: str, groups: tuple[str, ...] | list[str] = ()) -> str:
        token = secrets.token_urlsafe(32)
        all_groups = tuple(dict.fromkeys([*groups, AUTHENTICATED]))
        with self._lock:
            self._users[token] = User(user, all_groups)
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


def generate_tls(directory: Path, extra_ips: list[str]) -> TlsFiles:
    """A fresh CA and serving certificate, written as PEM files into `directory`."""
    now = datetime.datetime.now(datetime.UTC)
    valid = {"not_before": now - datetime.timedelta(minutes=5),
             "not_after": now + datetime.timedelta(days=365)}
    ca = make_ca("machine-agent-sandbox-ca", **valid)
    ips = {"127.0.0.1", "::1", *extra_ips}
    san: list[x509.GeneralName] = [x509.DNSName(n) for n in (
        "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")]
    san += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in sorted(ips)]
    cert, key = issue(ca, "kube-apiserver", names=san, **valid)
    directory.mkdir(parents=True, exist_ok=True)
    ca_pem = pem(ca.cert).decode()
    files = TlsFiles(ca_pem, directory / "ca.crt", directory / "apiserver.crt",
                     directory / "apiserver.key")
    files.ca_path.write_text(ca_pem)
    files.cert_path.write_bytes(pem(cert))
    files.key_path.write_bytes(key_pem(key))
    files.key_path.chmod(0o600)
    return files
