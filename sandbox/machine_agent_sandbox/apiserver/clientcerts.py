"""Client certificates, as kube-apiserver takes them (its x509 authenticator,
k8s.io/apiserver pkg/authentication/request/x509: a certificate signed by the client CA
is the user of its Common Name, in the groups of its Organizations) and as the cluster's
CSR signer issues them (kube-controller-manager's csrsigning, signing with the cluster
CA): what a kubelet's TLS bootstrap ends with."""

from __future__ import annotations

import datetime
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from machine_agent_sandbox.testkit.certs import Issuer, key_pem, pem

from .auth import AUTHENTICATED, User

VALIDITY = datetime.timedelta(days=365)
"""kube-controller-manager's --cluster-signing-duration default."""


class ClientCA:
    """The cluster CA as the issuer and verifier of client certificates."""

    def __init__(self, issuer: Issuer) -> None:
        self.issuer = issuer

    def issue(self, user: str, groups: list[str]) -> tuple[str, str]:
        """A client certificate for `user` in `groups` and its key (PEM)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, g)
                             for g in groups] + [x509.NameAttribute(NameOID.COMMON_NAME, user)])
        cert = (x509.CertificateBuilder().subject_name(subject)
                .issuer_name(self.issuer.cert.subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + VALIDITY)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                               critical=False)
                .add_extension(x509.KeyUsage(
                    digital_signature=True, key_encipherment=False, key_cert_sign=False,
                    crl_sign=False, content_commitment=False, data_encipherment=False,
                    key_agreement=False, encipher_only=False, decipher_only=False),
                    critical=True)
                .sign(self.issuer.key, hashes.SHA256()))
        return pem(cert).decode(), key_pem(key).decode()


def user_of(peer: dict[str, Any] | None) -> User | None:
    """The user a verified client certificate names (ssl's getpeercert() form), or None
    when the client presented none."""
    if not peer:
        return None
    names = [(k, v) for rdn in peer.get("subject") or () for k, v in rdn]
    common = next((v for k, v in names if k == "commonName"), None)
    if not common:
        return None
    groups = [v for k, v in names if k == "organizationName"]
    return User(str(common), tuple(dict.fromkeys([*groups, AUTHENTICATED])))
