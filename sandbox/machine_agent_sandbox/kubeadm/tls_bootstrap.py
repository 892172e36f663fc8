"""What the kubelet's TLS bootstrap leaves on a node (kubernetes/kubernetes
pkg/kubelet/certificate/bootstrap/bootstrap.go LoadClientCert, and the certificate
manager's file store, pkg/kubelet/certificate/kubelet.go): the signed client
certificate and its key in one PEM file, /var/lib/kubelet/pki/kubelet-client-<stamp>.pem,
a `kubelet-client-current.pem` symlink to it, and a kubelet.conf whose user names that
file as client-certificate and client-key (writeKubeconfigFromBootstrapping)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

PKI = "var/lib/kubelet/pki"
CURRENT = f"{PKI}/kubelet-client-current.pem"
"""The credential's system path (under the node's root), as kubelet.conf names it."""


def store(root: Path, certificate: str, key: str) -> Path:
    """Write the signed certificate and key as the kubelet's file store does; the real
    path of `kubelet-client-current.pem`."""
    directory = root / PKI
    directory.mkdir(parents=True, exist_ok=True, mode=0o755)
    stamp = time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime())
    name = f"kubelet-client-{stamp}.pem"
    fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(certificate + key)
    current = root / CURRENT
    current.unlink(missing_ok=True)
    current.symlink_to(name)
    return current


def kubeconfig_user() -> dict[str, Any]:
    """kubelet.conf's user after the bootstrap: the current certificate file, twice."""
    return {"client-certificate": f"/{CURRENT}", "client-key": f"/{CURRENT}"}


def credential_file(root: Path, user: dict[str, Any]) -> Path | None:
    """The real path of a kubelet.conf user's client certificate, if it names one."""
    cert = user.get("client-certificate")
    return root / str(cert).lstrip("/") if cert else None
