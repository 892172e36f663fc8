"""Why a server's certificate was refused, in words, and what fixes it.

Shared by the agent's HTTPS clients (the management and workload APIs, NetBox, CNI
downloads): each says in its own settings' terms what it trusts and which setting names
the server, and gets back the problem and the fix. OpenSSL's verify code tells an
untrusted issuer, a name the certificate does not list and a validity period apart; each
has its own fix. Imports nothing of the agent; ssl only on the error path.
"""

from __future__ import annotations

import re
from os import PathLike

from agent.recordtype import record


@record(frozen=True)
class Trust:
    """How a client verifies its server, in the words of its configuration."""

    trusted: str
    """What the client trusts: a CA file's path, or the system's bundle."""
    ca_fix: str
    """What to do when the server's certificate is not from a trusted CA."""
    name: str
    """The host name or address the certificate must list."""
    name_setting: str
    """The setting that gives that name, for the fix."""
    clock_note: str = ""
    """Appended to the node's time in the clock fix (e.g. when the time phase runs)."""


SYSTEM_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu (update-ca-certificates)
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  # RHEL, Fedora (update-ca-trust)
    "/etc/pki/tls/certs/ca-bundle.crt",  # older RHEL, Fedora
    "/etc/ssl/ca-bundle.pem",  # openSUSE, SLES
    "/etc/ssl/cert.pem",  # Alpine
)
"""Where operating systems keep the CA bundle their own tools trust, in the order Go's
crypto/x509 looks for one (root_linux.go): a site's CA installed the distribution's way
(/usr/local/share/ca-certificates + update-ca-certificates, as on-prem images do) is in
it."""


def system_bundle(root: str | PathLike[str] = "/") -> str | None:
    """The operating system's CA bundle under `root` (the Host's root), as a real path,
    its links resolved inside the root (an image's bundle linked to /etc/... is the
    image's, never the build host's); None when the system has none."""
    import os
    from pathlib import Path, PurePosixPath

    from agent.hostpath import resolve_in_root

    top = Path(root)
    for path in SYSTEM_BUNDLES:
        found = (os.fspath(path) if os.path.realpath(top) == "/"
                 else os.fspath(resolve_in_root(top, PurePosixPath(path).parts[1:])))
        if os.path.isfile(found):
            return found
    return None


def default_bundle(root: str | PathLike[str] = "/", *, environment: bool = False) -> str:
    """What a client verifies against when its configuration names no CA: for a client
    that honours the environment, the bundle REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE names;
    else the operating system's trust store under `root`; requests' own bundle (certifi)
    only on a system that has none."""
    import os

    named = (os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
             if environment else None)
    if named:
        return named
    found = system_bundle(root)
    if found is not None:
        return found
    import certifi  # requests' DEFAULT_CA_BUNDLE_PATH, without importing requests (~60 ms)

    return str(certifi.where())


def explain(err: BaseException, trust: Trust) -> tuple[str, str]:
    """The problem with the server's certificate and its fix, from a refused request."""
    import ssl
    from datetime import UTC, datetime

    cause: BaseException | None = err
    while cause is not None and not isinstance(cause, ssl.SSLCertVerificationError):
        cause = cause.__cause__ or cause.__context__
    if cause is None:  # not a certificate: a plain-HTTP port, no common protocol version
        return (f"the TLS handshake failed: {_innermost(err)}",
                f"{trust.name_setting} must name the server's HTTPS endpoint")
    code, text = cause.verify_code, str(cause.verify_message)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    clock = (f"if the certificate is current, this node's clock is wrong (it reads "
             f"{now}{trust.clock_note}): set it, e.g. from the BMC or hwclock; else renew "
             f"the server's certificate")
    if code == 10:  # X509_V_ERR_CERT_HAS_EXPIRED
        return "the server's certificate has expired", clock
    if code == 9:  # X509_V_ERR_CERT_NOT_YET_VALID
        return "the server's certificate is not valid yet", clock
    if code in (62, 64):  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
        return (f"the server's certificate is not valid for {trust.name!r}",
                f"{trust.name_setting} must name the server by a host name or address its "
                f"certificate lists in subjectAltName")
    # Issuer unknown, self-signed, chain not to a trusted CA; a signature failure is a CA
    # of the same name with another key (a regenerated cluster).
    # A certificate in the chain that may not do what it does: a leaf signing another
    # (basicConstraints without CA:TRUE), a CA whose keyUsage lacks keyCertSign, a server
    # certificate whose extendedKeyUsage lacks serverAuth. The server's certificates are
    # wrong, not this node's trust: another CA file would not help.
    if code in (24, 25, 26, 32, 37, 79):
        return (f"the server's certificate chain is malformed: {text}",
                "re-issue the server's certificate: signed by a CA certificate "
                "(basicConstraints CA:TRUE, keyUsage keyCertSign), with extendedKeyUsage "
                "serverAuth; this node's CA setting is not the problem")
    if code in (2, 7, 18, 19, 20, 21):
        return (f"the server's certificate is not signed by a CA this node trusts "
                f"({trust.trusted}): {text}", trust.ca_fix)
    return f"{text} (OpenSSL verify code {code})", trust.ca_fix


def _innermost(err: BaseException) -> str:
    """The innermost cause's text, without OpenSSL's source line: requests wraps urllib3
    wraps the ssl error."""
    while err.__context__ is not None:
        err = err.__context__
    return re.sub(r" \(_ssl\.c:\d+\)$", "", str(err))[:300]


def ca_pins(pem: bytes) -> list[str]:
    """The public key pins of the certificates in a PEM bundle, in kubeadm's
    caCertHashes form (`sha256:` and the SHA-256 of the DER SubjectPublicKeyInfo,
    app/util/pubkeypin/pubkeypin.go): how a user compares the CA a kubeconfig trusts with
    the cluster's. A block that does not parse is left out."""
    import base64
    import binascii
    import hashlib

    pins = []
    for block in re.findall(rb"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----",
                            pem, re.S):
        try:
            spki = _spki(base64.b64decode(b"".join(block.split())))
        except (ValueError, IndexError, binascii.Error):
            continue
        pins.append("sha256:" + hashlib.sha256(spki).hexdigest())
    return pins


def _spki(der: bytes) -> bytes:
    """The SubjectPublicKeyInfo of a DER certificate (RFC 5280: Certificate ::=
    SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL, serialNumber, signature,
    issuer, validity, subject, subjectPublicKeyInfo, ... } ... })."""
    _, start, _ = _tlv(der, 0)  # Certificate: its contents
    _, start, _ = _tlv(der, start)  # tbsCertificate: its contents
    at = start
    if der[at] == 0xA0:  # [0] EXPLICIT version
        at = _tlv(der, at)[2]
    for _ in range(5):  # serialNumber, signature, issuer, validity, subject
        at = _tlv(der, at)[2]
    tag, _, end = _tlv(der, at)
    if tag != 0x30:
        raise ValueError("no SubjectPublicKeyInfo")
    return der[at:end]


def _tlv(der: bytes, at: int) -> tuple[int, int, int]:
    """A DER element at `at`: its tag, where its contents start, where it ends."""
    tag, length, at = der[at], der[at + 1], at + 2
    if length & 0x80:
        count = length & 0x7F
        if not 0 < count <= 4:
            raise ValueError("bad DER length")
        length, at = int.from_bytes(der[at:at + count], "big"), at + count
    if at + length > len(der):
        raise ValueError("DER element past the end")
    return tag, at, at + length
