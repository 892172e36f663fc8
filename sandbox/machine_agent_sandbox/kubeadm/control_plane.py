"""A control plane's phases of a join: control-plane-prepare (the shared certificates,
downloaded with the certificateKey; the serving certificates, kubeconfigs and static Pod
manifests) and control-plane-join (the stacked etcd member)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from machine_agent_sandbox.kubeadm.node import (
    CA_PEM,
    CONTROL_PLANE_KUBECONFIGS,
    ETCD_MANIFEST,
    MANIFESTS,
    PKI_DIR,
    SHARED_CERTS,
    Failed,
    kubeconfig_text,
    write_file,
    write_kubeconfig,
)


def control_plane_prepare(root: Path, world: dict[str, Any], control_plane: dict[str, Any],
                           endpoint: str, name: str) -> None:
    """app/cmd/phases/join/controlplaneprepare.go: download-certs (the kubeadm-certs
    Secret, decrypted with certificateKey: app/phases/copycerts/copycerts.go
    DownloadCerts), certs, kubeconfig, control-plane (the static Pod manifests)."""
    key = control_plane.get("certificateKey")
    if key:
        uploaded = world.get("uploadedCerts")
        if uploaded is None:
            raise Failed("error execution phase control-plane-prepare/download-certs: error "
                         "downloading certs: error downloading the secret: Secret "
                         "\"kubeadm-certs\" was not found in the \"kube-system\" Namespace. "
                         "This Secret might have expired. Please, run `kubeadm init phase "
                         "upload-certs --upload-certs` on a control plane to generate a new "
                         "one")
        if uploaded.get("key") != key:
            raise Failed("error execution phase control-plane-prepare/download-certs: error "
                         "downloading certs: error decoding secret data with provided key: "
                         "cipher: message authentication failed")
        print("[download-certs] Downloading the certificates in Secret \"kubeadm-certs\" in "
              "the \"kube-system\" Namespace")
        for cert in SHARED_CERTS:
            write_file(root / PKI_DIR / cert, CA_PEM if cert.endswith(".crt") else "key\n", 0o600)
    control_plane_files(root, endpoint, name)


def control_plane_files(root: Path, endpoint: str, name: str) -> None:
    """What kubeadm writes on a control plane besides the kubelet's files: the serving
    certificates (certs), the kubeconfig files (kubeconfig), the static Pod manifests
    (control-plane; etcd's in the etcd step)."""
    for cert in ("apiserver.crt", "apiserver.key", "apiserver-kubelet-client.crt",
                 "front-proxy-client.crt", "etcd/server.crt", "etcd/peer.crt"):
        write_file(root / PKI_DIR / cert, CA_PEM, 0o600)
    for rel in CONTROL_PLANE_KUBECONFIGS:
        write_kubeconfig(root / rel, kubeconfig_text(endpoint, "kubernetes-admin"))
    for rel in MANIFESTS[1:]:
        write_file(root / rel, f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: "
                           f"{Path(rel).stem}-{name}\n", 0o600)


def control_plane_join(root: Path, world: dict[str, Any], name: str) -> None:
    """app/cmd/phases/join/controlplanejoin.go: etcd (the new member added to the stacked
    etcd cluster, app/phases/etcd/local.go CreateStackedEtcdStaticPodManifestFile), then
    mark-control-plane."""
    members = world.setdefault("etcdMembers", [])
    if name not in members:
        members.append(name)
    write_file(root / ETCD_MANIFEST, f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd-{name}\n",
           0o600)
    print("[etcd] Announced new etcd member joining to the existing etcd cluster")
    print(f"[mark-control-plane] Marking the node {name} as control-plane")
