"""Bootstrap data as CABPK writes it, and the Secret that holds it: the one builder of
both, for the sandbox's Machines and the tests'. Every flavour: the first control plane
(`kubeadm init`), a control plane that joins, a worker; as cloud-config (cluster-api
bootstrap/kubeadm/pkg/cloudinit: controlplane_init.go, controlplane_join.go, node.go,
files.go, commands.go, ntp.go) and as Ignition (pkg/ignition/ignition.go and clc/clc.go:
/etc/kubeadm.yml, /etc/kubeadm.sh run by kubeadm.service); kubeadm documents marshalled as
CABPK marshals them."""

from __future__ import annotations

import base64
import gzip
import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

import yaml

TOKEN = "abcdef.0123456789abcdef"
FRESH_TOKEN = "ghijkl.0123456789ghijkl"
CA_HASH = "sha256:" + "5e" * 32
"""The CA pin the kubeadm stand-in's workload cluster answers to."""
NODE_NAME = "{{ ds.meta_data.local_hostname }}"
"""The node name CABPK's templates give: cloud-init's instance data answers it."""
SENTINEL = "echo success > /run/cluster-api/bootstrap-success.complete"
PLACEHOLDER = ("This placeholder file is used to create the /run/cluster-api sub directory "
               "in a way that is compatible with both Linux and Windows (mkdir -p "
               "/run/cluster-api does not work with Windows)")
# secret.Certificates.AsFiles: the CAs every control plane shares (crt 0640, key 0600).
SHARED = ("ca", "etcd/ca", "front-proxy-ca")


@dataclass(frozen=True)
class File:
    path: str
    content: str
    permissions: str = "0640"
    owner: str = "root:root"


def certificate_files() -> list[File]:
    files = []
    for name in SHARED:
        files.append(File(f"/etc/kubernetes/pki/{name}.crt", f"-----BEGIN CERTIFICATE-----\n"
                          f"{name}\n-----END CERTIFICATE-----\n"))
        files.append(File(f"/etc/kubernetes/pki/{name}.key", "key\n", "0600"))
    files.append(File("/etc/kubernetes/pki/sa.pub", "public\n"))
    files.append(File("/etc/kubernetes/pki/sa.key", "key\n", "0600"))
    return files


def _args(version: str, args: dict[str, str]) -> object:
    if version == "v1beta4":
        return [{"name": k, "value": v} for k, v in args.items()]
    return args


def _marshal(*docs: dict[str, object]) -> str:
    """kubeadm documents as CABPK marshals them (sigs.k8s.io/yaml: sorted keys, Go's
    empty structs `{}` and nil slices `null` written)."""
    return "".join("---\n" + yaml.safe_dump(d, sort_keys=True, width=10000) for d in docs)


def init_configuration(endpoint: str, name: str, token: str, version: str = "v1beta4",
                       certificate_key: str | None = None, *,
                       local: dict[str, object] | None = None) -> str:
    """ClusterConfiguration then InitConfiguration, as KCP renders them into
    /run/kubeadm/kubeadm.yaml; `local` replaces the localAPIEndpoint."""
    init: dict[str, object] = {
        "apiVersion": f"kubeadm.k8s.io/{version}",
        "bootstrapTokens": [{"token": token, "ttl": "15m0s"}], "kind": "InitConfiguration",
        "localAPIEndpoint": {"advertiseAddress": "192.0.2.10", "bindPort": 6443}
        if local is None else local,
        "nodeRegistration": {"kubeletExtraArgs": _args(version, {"node-ip": "192.0.2.10"}),
                             "name": name, "taints": None}}
    if certificate_key:
        init["certificateKey"] = certificate_key
    return _marshal({"apiServer": {}, "apiVersion": f"kubeadm.k8s.io/{version}",
                     "clusterName": "demo",
                     "controlPlaneEndpoint": endpoint, "controllerManager": {}, "dns": {},
                     "etcd": {}, "kind": "ClusterConfiguration",
                     "kubernetesVersion": "v1.31.2",
                     "networking": {"podSubnet": "192.168.0.0/16",
                                    "serviceSubnet": "10.96.0.0/12"},
                     "scheduler": {}}, init)


def join_configuration(endpoint: str, name: str, token: str = TOKEN, ca_hash: str = CA_HASH,
                       version: str = "v1beta4", control_plane: bool = False,
                       certificate_key: str | None = None, address: str = "192.0.2.20", *,
                       node_ip: bool = True, local: dict[str, object] | None = None) -> str:
    """A JoinConfiguration; with `control_plane`, its controlPlane section (`local`
    replaces its localAPIEndpoint); `node_ip`: the kubelet's node-ip is `address`."""
    registration: dict[str, object] = {"name": name, "taints": None}
    if node_ip:
        registration["kubeletExtraArgs"] = _args(version, {"node-ip": address})
    join: dict[str, object] = {
        "apiVersion": f"kubeadm.k8s.io/{version}",
        "discovery": {"bootstrapToken": {"apiServerEndpoint": endpoint,
                                         "caCertHashes": [ca_hash], "token": token}},
        "kind": "JoinConfiguration", "nodeRegistration": registration}
    if control_plane:
        cp: dict[str, object] = {"localAPIEndpoint": {"advertiseAddress": address,
                                                      "bindPort": 6443}
                                 if local is None else local}
        if certificate_key:
            cp["certificateKey"] = certificate_key
        join["controlPlane"] = cp
    return _marshal(join)


@dataclass(frozen=True)
class Flavour:
    """What CABPK puts in one Machine's bootstrap data."""

    kubeadm: str
    """`init` or `join`."""
    config: str
    """The kubeadm configuration file's content."""
    files: tuple[File, ...] = ()
    pre: tuple[str, ...] = ()
    post: tuple[str, ...] = ()
    extra: str = ""
    """More top-level cloud-config (users, ...), as CABPK's templates add it."""
    ntp: tuple[str, ...] | None = None
    """KubeadmConfig ntp (enabled) with these servers; None: no ntp."""

    @property
    def config_path(self) -> str:
        return "/run/kubeadm/kubeadm.yaml" if self.kubeadm == "init" else \
            "/run/kubeadm/kubeadm-join-config.yaml"


def _indent(text: str, by: int) -> str:
    return "".join(" " * by + line + "\n" for line in text.splitlines())


def cabpk_cloud_config(flavour: Flavour) -> str:
    """The cloud-config CABPK's templates render (controlplane_init.go, controlplane_join.go,
    node.go)."""
    out = ["## template: jinja\n#cloud-config\n", "write_files:\n"]
    for f in (*flavour.files, File(flavour.config_path, flavour.config)):
        out.append(f"-   path: {f.path}\n    owner: {f.owner}\n    permissions: "
                   f"'{f.permissions}'\n    content: |\n{_indent(f.content, 6)}")
    out.append(f"-   path: /run/cluster-api/placeholder\n    owner: root:root\n    "
               f"permissions: '0640'\n    content: \"{PLACEHOLDER}\"\nruncmd:\n")
    out.extend(f"  - {json.dumps(c)}\n" for c in flavour.pre)
    if flavour.kubeadm == "init":
        out.append(f"  - 'kubeadm init --config {flavour.config_path}  && {SENTINEL}'\n")
    else:
        out.append(f"  - kubeadm join --config {flavour.config_path}  && {SENTINEL}\n")
    out.extend(f"  - {json.dumps(c)}\n" for c in flavour.post)
    if flavour.ntp is not None:  # ntp.go
        out.append("ntp:\n  enabled: true\n  servers:"
                   + "".join(f"\n    - {s}" for s in flavour.ntp) + "\n")
    return "".join(out) + flavour.extra


def _ntp_conf(servers: tuple[str, ...]) -> str:
    """/etc/ntp.conf as clc.go writes it."""
    return ("# Common pool\n" + "".join(f"server {s}\n" for s in servers)
            + "\n# Warning: Using default NTP settings will leave your NTP\n# server "
            "accessible to all hosts on the Internet.\n\n# If you want to deny all machines "
            "(including your own)\n# from accessing the NTP server, uncomment:\n#restrict "
            "default ignore\n\n# Default configuration:\n# - Allow only time queries, at a "
            "limited rate, sending KoD when in excess.\n# - Allow all local queries (IPv4, "
            "IPv6)\nrestrict default nomodify nopeer noquery notrap limited kod\nrestrict "
            "127.0.0.1\nrestrict [::1]\n")


def _data_url(content: str, compress: bool) -> dict[str, object]:
    if compress:  # Ignition 3: compression gzip, the data base64
        packed = base64.b64encode(gzip.compress(content.encode())).decode()
        return {"source": f"data:;base64,{packed}", "compression": "gzip"}
    # as Go marshals flatcar/ignition's FileContents: the empty Verification too
    return {"source": "data:," + urllib.parse.quote(content, safe="()"), "verification": {}}


def cabpk_ignition(flavour: Flavour, version: str = "2.3.0", compress: bool = False,
             root: str = "") -> str:
    """The Ignition JSON CABPK's CLC template converts to (clc.go clcTemplate): the
    write_files, /etc/kubeadm.sh, /etc/kubeadm.yml, and kubeadm.service. Spec 2.3.0 as Go
    marshals flatcar/ignition's v2_3 types: fields in their order, every empty struct
    written (`"networkd":{}`, `"security":{"tls":{}}`, `"verification":{}`). Commands run
    on the machine itself, so a test under a temporary root gives it as `root`: the
    script's `mv` of the kubeadm config then moves the file under it."""
    v2 = version.startswith("2.")
    lines = ["#!/bin/bash", "set -e", *flavour.pre, "",
             f"kubeadm {flavour.kubeadm} --config /etc/kubeadm.yml ",
             "mkdir -p /run/cluster-api && " + SENTINEL,
             f"mv {root}/etc/kubeadm.yml {root}/tmp/", *flavour.post]
    files = [*[(f.path, f.content, int(f.permissions, 8), f.owner) for f in flavour.files],
             ("/etc/kubeadm.sh", "\n".join(lines) + "\n", 0o700, ""),
             ("/etc/kubeadm.yml", flavour.config, 0o600, "")]
    if flavour.ntp:
        files.append(("/etc/ntp.conf", _ntp_conf(flavour.ntp), 0o644, ""))
    entries = []
    for path, content, mode, owner in files:
        user, _, group = owner.partition(":")
        entry: dict[str, object] = {"filesystem": "root"} if v2 else {}
        if group:
            entry["group"] = {"name": group}
        entry["path"] = path
        if user:
            entry["user"] = {"name": user}
        entry.update(contents=_data_url(content, compress), mode=mode)
        entries.append(entry)
    unit = ("[Unit]\nDescription=kubeadm\n# Run only once. After successful run, this file "
            "is moved to /tmp/.\nConditionPathExists=/etc/kubeadm.yml\nAfter=network.target\n"
            "[Service]\n# To not restart the unit when it exits, as it is expected.\n"
            "Type=oneshot\nExecStart=/etc/kubeadm.sh\n[Install]\n"
            "WantedBy=multi-user.target\n")
    units = [{"contents": unit, "enabled": True, "name": "kubeadm.service"}]
    if flavour.ntp is not None:
        units.append({"enabled": True, "name": "ntpd.service"})
    if not v2:
        return json.dumps({"ignition": {"version": version}, "storage": {"files": entries},
                           "systemd": {"units": units}})
    return json.dumps({"ignition": {"config": {}, "security": {"tls": {}}, "timeouts": {},
                                    "version": version},
                       "networkd": {}, "passwd": {}, "storage": {"files": entries},
                       "systemd": {"units": units}}, separators=(",", ":"))


def cloud_config(endpoint: str, token: str = TOKEN, version: str = "v1beta4",
                 pre: tuple[str, ...] = (), post: tuple[str, ...] = (),
                 certificate_key: str | None = None,
                 node_ip: str | None = "192.0.2.20") -> str:
    """A worker's cloud-config (with `certificate_key`, a control plane's that joins),
    named by cloud-init's instance data; `node_ip` as kubeletExtraArgs (None: none);
    `pre` and `post` commands around the join."""
    config = join_configuration(endpoint, NODE_NAME, token, CA_HASH, version,
                                control_plane=certificate_key is not None,
                                certificate_key=certificate_key,
                                address=node_ip or "192.0.2.20", node_ip=node_ip is not None)
    return cabpk_cloud_config(Flavour("join", config, pre=pre, post=post))


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
