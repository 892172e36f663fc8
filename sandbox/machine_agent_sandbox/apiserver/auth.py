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

from machine_agent_sandbox.files import write_atomic
from machine_agent_sandbox.testkit.certs import Issuer, issue, key_pem, make_ca, pem

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


def service_account_user(namespace: str, name: str, uid: str = "") -> User:
    return User(f"system:serviceaccount:{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
                uid)


@dataclass(frozen=True)
class BoundTo:
    """The ServiceAccount a TokenRequest token was issued for: kube-apiserver accepts
    the token only while that account exists with this uid and is not being deleted
    (pkg/serviceaccount/claims.go), so deleting the account revokes its tokens."""

    namespace: str
    name: str
    uid: str


class Tokens:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: dict[str, User] = {}
        self._bound: dict[str, BoundTo] = {}

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

    def issue_bound(self, account: BoundTo) -> str:
        """A token for the ServiceAccount `account`, valid while it exists (its uid is
        the user's uid, as the real server's ServiceAccountInfo gives it)."""
        token = self.issue_for(service_account_user(account.namespace, account.name,
                                                    account.uid))
        with self._lock:
            self._bound[token] = account
        return token

    def user(self, token: str) -> User | None:
        with self._lock:
            return self._users.get(token)

    def bound_to(self, token: str) -> BoundTo | None:
        with self._lock:
            return self._bound.get(token)


@dataclass(frozen=True)
class TlsFiles:
    ca_pem: str
    ca_path: Path
    cert_path: Path
    key_path: Path
    ca: Issuer
    """The CA itself: it signs the client certificates the cluster issues."""


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
                     directory / "apiserver.key", ca)
    write_atomic(files.ca_path, ca_pem)
    write_atomic(files.cert_path, pem(cert))
    write_atomic(files.key_path, key_pem(key), mode=0o600)
    return files
