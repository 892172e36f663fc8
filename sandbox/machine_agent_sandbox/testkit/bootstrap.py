"""Bootstrap data as CABPK writes it, and the Secret that holds it: the one builder of
both, for the sandbox's Machines and the tests'."""

from __future__ import annotations

import base64
from typing import Any

import yaml

TOKEN = "abcdef.0123456789abcdef"
FRESH_TOKEN = "ghijkl.0123456789ghijkl"
CA_HASH = "sha256:" + "5e" * 32
"""The CA pin the kubeadm stand-in's workload cluster answers to."""


def cloud_config(endpoint: str, token: str = TOKEN, version: str = "v1beta4",
                 pre: tuple[str, ...] = (), post: tuple[str, ...] = (),
                 certificate_key: str | None = None,
                 node_ip: str | None = "192.0.2.20") -> str:
    """Bootstrap data shaped as CABPK writes it (cluster-api bootstrap/kubeadm/internal/
    cloudinit/node.go: the JoinConfiguration file, the placeholder, the join runcmd);
    with `certificate_key`, a control-plane join; `node_ip` as kubeletExtraArgs
    (None: none); `pre` and `post` commands around the join."""
    args = ""
    if node_ip is not None:
        args = (f"  kubeletExtraArgs:\n  - name: node-ip\n    value: {node_ip}\n"
                if version == "v1beta4" else f"  kubeletExtraArgs:\n    node-ip: {node_ip}\n")
    control_plane = (f"controlPlane:\n  certificateKey: {certificate_key}\n  localAPIEndpoint:"
                     "\n    advertiseAddress: 192.0.2.20\n    bindPort: 6443\n"
                     if certificate_key else "")
    join = (f"---\napiVersion: kubeadm.k8s.io/{version}\n{control_plane}"
            "discovery:\n  bootstrapToken:\n"
            f"    apiServerEndpoint: {endpoint}\n    caCertHashes:\n    - {CA_HASH}\n"
            f"    token: {token}\nkind: JoinConfiguration\nnodeRegistration:\n"
            f"{args}  name: '{{{{ ds.meta_data.local_hostname }}}}'\n")
    doc = {
        "write_files": [
            {"path": "/run/kubeadm/kubeadm-join-config.yaml", "owner": "root:root",
             "permissions": "0640", "content": join},
            {"path": "/run/cluster-api/placeholder", "owner": "root:root",
             "permissions": "0640", "content": "This placeholder file is used to create "
                                               "the /run/cluster-api sub directory"},
        ],
        "runcmd": [*pre, "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && "
                         "echo success > /run/cluster-api/bootstrap-success.complete", *post],
    }
    body = yaml.safe_dump(doc, sort_keys=False, width=10000)
    return "## template: jinja\n#cloud-config\n\n" + body


def bootstrap_secret(namespace: str, name: str, data: str, *,
                     labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The bootstrap data Secret of a Machine (`spec.bootstrap.dataSecretName`)."""
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
            "metadata": metadata,
            "data": {"value": b64(data), "format": b64("cloud-config")}}
