"""Hints that send the operator the right way (issue 26 #12): an API server that answers
500 is reachable (not a route or firewall problem); a server certificate chain with a
leaf used as a CA, or a certificate with the wrong key usage, is the server's to fix
(giving this node a CA would not help)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from machine_agent_sandbox.testkit.certs import (
    DAY,
    LOOPBACK,
    NOW,
    Issuer,
    https_server,
    make_ca,
    pem,
)

from agent.errors import Reason
from agent.kube.errors import error_from_status
from agent.tls import Trust, explain

CA_FIX = "spec.management.caFile must hold the management cluster's CA"


@pytest.mark.parametrize("code", [500, 502, 503])
def test_a_server_error_does_not_point_at_the_route_or_firewall(code: int) -> None:
    err = error_from_status(code, {"reason": "InternalError", "message": "etcd timeout"},
                            "GET machines site-a/worker-0")
    assert err.temporary and err.reason == Reason.ManagementUnreachable
    assert "route" not in str(err) and "firewall" not in str(err)
    assert "answered but failed: look at its logs" in str(err)


def _cert(issuer: Issuer, cn: str, *, ca: bool | None = None,
          usage: list[x509.ObjectIdentifier] | None = None) -> Issuer:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (x509.CertificateBuilder().subject_name(
                   x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, cn)]))
               .issuer_name(issuer.cert.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(NOW - DAY).not_valid_after(NOW + DAY)
               .add_extension(x509.SubjectAlternativeName(LOOPBACK), critical=False))
    if ca is not None:
        builder = builder.add_extension(x509.BasicConstraints(ca=ca, path_length=None),
                                        critical=True)
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    return Issuer(cn, builder.sign(issuer.key, hashes.SHA256()), key)


def leaf_as_ca(ca: Issuer) -> tuple[list[x509.Certificate], ec.EllipticCurvePrivateKey]:
    middle = _cert(ca, "not-a-ca", ca=False)
    server = _cert(middle, "server")
    return [server.cert, middle.cert], server.key


def client_auth_only(ca: Issuer) -> tuple[list[x509.Certificate], ec.EllipticCurvePrivateKey]:
    server = _cert(ca, "server", usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    return [server.cert], server.key


@pytest.mark.parametrize("make", [leaf_as_ca, client_auth_only])
def test_a_malformed_server_chain_is_not_blamed_on_this_nodes_ca(
        tmp_path: Path, make: Callable[[Issuer], tuple[list[x509.Certificate],
                                                       ec.EllipticCurvePrivateKey]]) -> None:
    ca = make_ca("cluster-ca")
    (tmp_path / "ca.crt").write_bytes(pem(ca.cert))
    chain, key = make(ca)
    (tmp_path / "server.crt").write_bytes(b"".join(pem(c) for c in chain))
    (tmp_path / "server.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    trust = Trust(str(tmp_path / "ca.crt"), CA_FIX, "127.0.0.1", "spec.management.server")
    with https_server(tmp_path / "server.crt", tmp_path / "server.key") as server, \
            pytest.raises(requests.exceptions.SSLError) as refused:
        requests.get(server.url, verify=str(tmp_path / "ca.crt"), timeout=10)
    problem, fix = explain(refused.value, trust)
    assert "the server's certificate chain is malformed" in problem
    assert fix != CA_FIX and "re-issue the server's certificate" in fix
