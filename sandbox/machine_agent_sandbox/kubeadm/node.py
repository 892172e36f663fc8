"""What kubeadm writes on the node and where, how it writes it, and how it fails (its
error, exit status and stack hint)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

from machine_agent_sandbox.kubeadm import tls_bootstrap

KUBELET_CONF = "etc/kubernetes/kubelet.conf"
BOOTSTRAP_CONF = "etc/kubernetes/bootstrap-kubelet.conf"
CA_CERT = "etc/kubernetes/pki/ca.crt"
KUBELET_CONFIG = "var/lib/kubelet/config.yaml"
KUBELET_FLAGS = "var/lib/kubelet/kubeadm-flags.env"
KUBELET_PROGRAM = "usr/bin/kubelet"
"""The node's kubelet program (spec.join.kubeletBinary's default), which an in-place
release change replaces."""
PKI_DIR = "etc/kubernetes/pki"
MANIFESTS_DIR = "etc/kubernetes/manifests"
ETCD_MANIFEST = f"{MANIFESTS_DIR}/etcd.yaml"
# app/constants/constants.go: the static Pod manifests and kubeconfig files of a control
# plane (init: app/phases/controlplane, etcd, kubeconfig; join: control-plane-prepare).
MANIFESTS = tuple(f"{MANIFESTS_DIR}/{c}.yaml" for c in (
    "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"))
CONTROL_PLANE_KUBECONFIGS = tuple(f"etc/kubernetes/{n}.conf" for n in (
    "admin", "super-admin", "controller-manager", "scheduler"))
# app/phases/certs/certs.go SharedCertificateExists: what every control plane shares
# (with a local etcd), provided by the bootstrap data or downloaded with certificateKey.
SHARED_CERTS = ("ca.crt", "ca.key", "sa.key", "sa.pub", "front-proxy-ca.crt",
                "front-proxy-ca.key", "etcd/ca.crt", "etcd/ca.key")
CNI_CONF_DIR = "etc/cni/net.d"
API_TIMEOUT = 10.0
# cmd/kubeadm/app/util/error.go: DefaultErrorExitCode, PreFlightExitCode, ValidationExitCode.
# checkErr picks 3 for a field-error Aggregate (config validation, returned before any
# phase runs) and 2 for a bare preflight error; a phase's error is wrapped by the
# workflow runner ("error execution phase %s", app/cmd/phases/workflow/runner.go) and
# exits 1, preflight included.
EXIT_DEFAULT, EXIT_PREFLIGHT, EXIT_VALIDATION = 1, 2, 3


class Failed(Exception):
    """kubeadm's error: printed to stderr as kubeadm prints it; exit status `code`."""

    def __init__(self, message: str, code: int = EXIT_DEFAULT) -> None:
        super().__init__(message)
        self.code = code


CA_PEM = "-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n"


def kubeconfig_text(server: str, user: str, api: dict[str, str] | None = None,
                certificate: Path | None = None) -> str:
    cluster: dict[str, str] = {"server": server}
    if api:
        cluster["certificate-authority-data"] = base64.b64encode(
            Path(api["ca"]).read_bytes()).decode()
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "default-context",
        "clusters": [{"name": "default-cluster", "cluster": cluster}],
        "contexts": [{"name": "default-context",
                      "context": {"cluster": "default-cluster", "user": user}}],
        "users": [{"name": user, "user": tls_bootstrap.kubeconfig_user() if certificate
                   else {}}]})


def write_file(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as out:
        os.fchmod(fd, mode)  # an existing file keeps its mode otherwise
        out.write(text)


def write_kubeconfig(path: Path, text: str) -> None:
    """As kubeadm writes kubeconfig files (kubeconfigutil.WriteToDisk, through client-go's
    clientcmd.WriteToFile): mode 0600, they hold a credential."""
    write_file(path, text, 0o600)
