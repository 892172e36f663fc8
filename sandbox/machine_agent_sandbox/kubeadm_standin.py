"""A faithful stand-in for `kubeadm` (and `kubelet --version`), for tests and the demo.

kubeadm cannot be installed here. This program behaves like it where the agent can see:
`join --config FILE` reads the JoinConfiguration strictly per the real schema
(kubeadm.k8s.io/v1beta3 and v1beta4), runs the join preflight, discovery, kubelet-start
in kubeadm's order, writes what kubeadm writes under $KUBEADM_STANDIN_ROOT, and fails with
kubeadm's own words (copied from kubernetes/kubernetes cmd/kubeadm, file named at each);
`init --config FILE` reads the InitConfiguration and ClusterConfiguration and makes the
cluster (its etcd, its tokens); a JoinConfiguration with controlPlane runs the control-
plane preflight, prepare (certificates, downloaded with certificateKey) and etcd join;
`reset -f [--skip-phases=...]` removes what they wrote (and the etcd member); exit
status and error format as kubeadm's of the world's version (before 1.33: 1, 2 for a bare
preflight error, 3 for validation; from 1.33: 1 and "error: ", machine_agent_sandbox.
kubeadm.errors); `version -o short` prints the version.

After a successful join it also does what the kubelet then does on a real node: its TLS
bootstrap ends in a client certificate for `system:node:<name>` (group `system:nodes`)
signed by the cluster (the API stand-in's CSR signer hook), stored as the kubelet stores
it and named by kubelet.conf (machine_agent_sandbox.kubeadm.tls_bootstrap); with it the
kubelet registers its Node, NotReady until a CNI configuration is in /etc/cni/net.d (the
kubelet's network readiness).

The workload cluster it joins is a JSON "world" file ($KUBEADM_STANDIN_WORLD):
  version             kubeadm/kubelet version, default v1.31.2
  tokens              {token id: secret} the cluster knows (absent: any token works).
                      With `apiServer`, discovery is kubeadm's (token.go): cluster-info is
                      published there signed for each of these tokens, read anonymously,
                      its JWS signature and CA pin checked
  caCertHash          stands for the cluster CA's pin (absent: the real pin of the
                      `apiServer` CA is checked; without an API, any pin works)
  apiServer           {"ca": CA file, "signerToken": token}: the workload API stand-in at
                      the discovery endpoint (its CA, as cluster-info holds it; a token
                      allowed to issue credentials, standing for the CSR signer); absent:
                      no API to register with, kubelet.conf carries no credentials
  readyNodes          names of Nodes already Ready in the cluster
  failNext            failures for the next joins, one consumed per join:
                      "kubelet-unhealthy", "preflight:<Check>:<message>", "hang:<seconds>",
                      "phase-error:<phase>:<message>" (any other error of a phase),
                      "node-not-registered" (join succeeds; the kubelet never registers),
                      "killed-after:kubelet-conf" / "killed-after:registered" (kubeadm and
                      the agent that ran it are killed with SIGKILL right after kubelet.conf
                      is written / after the Node registered: a power cut mid-join)
  joins               (written) the names that joined, in order (written when kubeadm
                      ends: a kubeadm killed after its Node registered is not in it;
                      `registrations` on the Node counts such a join too)
  invocations         (written) every join, init and reset run, in order
  etcdMembers         (written by init and a control-plane join; reset removes) the
                      stacked etcd members
  clusterConfiguration (written by init) what a joining control plane reads
  uploadedCerts       {"key": certificateKey}: the kubeadm-certs Secret init uploaded
Run as `python -m machine_agent_sandbox.kubeadm_standin [kubelet] ARGS`; `install()` writes
`kubeadm` and `kubelet` wrappers into a bin directory with the root and world baked in.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import signal
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from machine_agent_sandbox.files import write_atomic
from machine_agent_sandbox.kubeadm import kubelet, tls_bootstrap
from machine_agent_sandbox.kubeadm.discovery import unpinned_token_discovery
from machine_agent_sandbox.kubeadm.errors import exit_with
from machine_agent_sandbox.kubeadm.flags import (
    extra_args,
    kubelet_flag,
    kubelet_flags,
    kubelet_node_name,
)
from machine_agent_sandbox.kubeadm.hostname import node_name
from machine_agent_sandbox.kubeadm.preflight import manifests_dir_check
from machine_agent_sandbox.kubeadm.reset import cleanup_node

KUBELET_CONF = "etc/kubernetes/kubelet.conf"
BOOTSTRAP_CONF = "etc/kubernetes/bootstrap-kubelet.conf"
CA_CERT = "etc/kubernetes/pki/ca.crt"
KUBELET_CONFIG = "var/lib/kubelet/config.yaml"
KUBELET_FLAGS = "var/lib/kubelet/kubeadm-flags.env"
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

# The JoinConfiguration schema: field -> type, per apis/kubeadm/v1beta3/types.go and
# v1beta4/types.go. A dict is a nested object; [x] a list of x; "str:str" a string map.
_TAINT = {"key": str, "value": str, "effect": str, "timeAdded": str}
_BOOTSTRAP_TOKEN = {"token": str, "apiServerEndpoint": str, "caCertHashes": [str],
                    "unsafeSkipCAVerification": bool}
_CONTROL_PLANE = {"localAPIEndpoint": {"advertiseAddress": str, "bindPort": int},
                  "certificateKey": str}
_COMMON_REG = {"name": str, "criSocket": str, "taints": [_TAINT],
               "ignorePreflightErrors": [str], "imagePullPolicy": str}
SCHEMAS: dict[str, dict[str, Any]] = {
    "kubeadm.k8s.io/v1beta3": {
        "apiVersion": str, "kind": str, "caCertPath": str, "skipPhases": [str],
        "patches": {"directory": str}, "controlPlane": _CONTROL_PLANE,
        "nodeRegistration": {**_COMMON_REG, "kubeletExtraArgs": "str:str"},
        "discovery": {"bootstrapToken": _BOOTSTRAP_TOKEN,
                      "file": {"kubeConfigPath": str}, "tlsBootstrapToken": str,
                      "timeout": str},
    },
    "kubeadm.k8s.io/v1beta4": {
        "apiVersion": str, "kind": str, "dryRun": bool, "caCertPath": str,
        "skipPhases": [str], "patches": {"directory": str}, "controlPlane": _CONTROL_PLANE,
        "nodeRegistration": {**_COMMON_REG, "imagePullSerial": bool,
                             "kubeletExtraArgs": [{"name": str, "value": str}]},
        "discovery": {"bootstrapToken": _BOOTSTRAP_TOKEN,
                      "file": {"kubeConfigPath": str}, "tlsBootstrapToken": str},
        "timeouts": {k: str for k in ("controlPlaneComponentHealthCheck",
                                      "kubeletHealthCheck", "kubernetesAPICall",
                                      "etcdAPICall", "tlsBootstrap", "discovery",
                                      "upgradeManifests")},
    },
}
_ANY = object
"""A subtree the stand-in does not check field by field (extra volumes, etcd options)."""
_ARGS3, _ARGS4 = "str:str", [{"name": str, "value": str}]
_LOCAL_ENDPOINT = {"advertiseAddress": str, "bindPort": int}
_BOOTSTRAP_TOKENS = [{"token": str, "description": str, "ttl": str, "expires": str,
                      "usages": [str], "groups": [str]}]


def _init_schema(args: Any, v4: bool) -> dict[str, Any]:
    """InitConfiguration, apis/kubeadm/v1beta3|v1beta4/types.go."""
    schema: dict[str, Any] = {
        "apiVersion": str, "kind": str, "bootstrapTokens": _BOOTSTRAP_TOKENS,
        "nodeRegistration": {**_COMMON_REG, "kubeletExtraArgs": args},
        "localAPIEndpoint": _LOCAL_ENDPOINT, "certificateKey": str, "skipPhases": [str],
        "patches": {"directory": str}}
    if v4:
        schema["nodeRegistration"]["imagePullSerial"] = bool
        schema.update(dryRun=bool, timeouts=SCHEMAS["kubeadm.k8s.io/v1beta4"]["timeouts"])
    return schema


def _cluster_schema(args: Any, v4: bool) -> dict[str, Any]:
    """ClusterConfiguration, apis/kubeadm/v1beta3|v1beta4/types.go."""
    component = {"extraArgs": args, "extraVolumes": [_ANY]}
    if v4:
        component["extraEnvs"] = [_ANY]
    schema: dict[str, Any] = {
        "apiVersion": str, "kind": str, "etcd": {"local": _ANY, "external": _ANY},
        "networking": {"serviceSubnet": str, "podSubnet": str, "dnsDomain": str},
        "kubernetesVersion": str, "controlPlaneEndpoint": str,
        "apiServer": {**component, "certSANs": [str],
                      **({} if v4 else {"timeoutForControlPlane": str})},
        "controllerManager": component, "scheduler": component,
        "dns": {"imageRepository": str, "imageTag": str, **({"disabled": bool} if v4 else {})},
        "certificatesDir": str, "imageRepository": str, "featureGates": _ANY,
        "clusterName": str}
    if v4:
        schema.update(proxy={"disabled": bool}, encryptionAlgorithm=str,
                      certificateValidityPeriod=str, caCertificateValidityPeriod=str)
    return schema


INIT_SCHEMAS = {"kubeadm.k8s.io/v1beta3": _init_schema(_ARGS3, False),
                "kubeadm.k8s.io/v1beta4": _init_schema(_ARGS4, True)}
CLUSTER_SCHEMAS = {"kubeadm.k8s.io/v1beta3": _cluster_schema(_ARGS3, False),
                   "kubeadm.k8s.io/v1beta4": _cluster_schema(_ARGS4, True)}
_TOKEN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")
# app/util/config/common.go, validateSupportedVersion: versions kubeadm names a release for.
OLD_API_VERSIONS = {"kubeadm.k8s.io/v1alpha1": "v1.11", "kubeadm.k8s.io/v1alpha2": "v1.12",
                    "kubeadm.k8s.io/v1alpha3": "v1.14", "kubeadm.k8s.io/v1beta1": "v1.15",
                    "kubeadm.k8s.io/v1beta2": "v1.22"}


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


def main(argv: list[str]) -> int:
    root = Path(os.environ.get("KUBEADM_STANDIN_ROOT", "/"))
    world_path = os.environ.get("KUBEADM_STANDIN_WORLD")
    world: dict[str, Any] = json.loads(Path(world_path).read_text()) if world_path else {}
    version = world.get("version", "v1.31.2")
    try:
        if argv[:1] == ["kubelet"]:
            if argv[1:] == ["--version"]:
                print(f"Kubernetes {version}")
                return 0
            raise Failed("the kubelet stand-in only answers --version")
        if argv[:3] == ["version", "-o", "short"]:
            print(version)
            return 0
        if argv[:1] in (["reset"], ["join"], ["init"]):
            command = {"reset": reset, "join": join, "init": init}[argv[0]]
            world.setdefault("invocations", []).append(argv[0])  # every run, counted
            try:
                return command(root, world, argv[1:])
            finally:
                if world_path:
                    write_atomic(Path(world_path), json.dumps(world, indent=1))
        raise Failed(f"unknown command {' '.join(argv[:1])!r} for \"kubeadm\"")
    except Failed as err:
        return exit_with(str(err), err.code, version)


def reset(root: Path, world: dict[str, Any], args: list[str]) -> int:
    """app/cmd/reset.go with its phases (app/cmd/phases/reset): preflight,
    remove-etcd-member (a control plane's stacked etcd member, removed through the etcd
    cluster: resetremoveetcdmember.go), cleanup-node (machine_agent_sandbox.kubeadm.reset:
    the kubelet stopped, its directory, the manifests and PKI emptied, the kubeconfig
    files deleted)."""
    skip: set[str] = set()
    force = False
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if name in ("-f", "--force"):
            force = True
        elif name == "--skip-phases":
            skip |= set((value if eq else (args.pop(0) if args else "")).split(","))
        elif name not in ("--v", "-v"):
            raise Failed(f"unknown flag: {name}")
    if not force:
        raise Failed("won't proceed; the user didn't answer (Y|n) in order to continue")
    if "remove-etcd-member" not in skip and (root / ETCD_MANIFEST).exists():
        name = _node_name_of(root)
        members = world.get("etcdMembers") or []
        if name in members:
            members.remove(name)
            print(f"[reset] Removing etcd member: {name}")
        world.setdefault("etcdRemovedBy", []).append(name)
    elif (root / ETCD_MANIFEST).exists():
        print("[reset] Skipping phase remove-etcd-member")
    if "cleanup-node" in skip:
        return 0
    for line in cleanup_node(root):
        print(line)
    return 0


def _node_name_of(root: Path) -> str:
    return kubelet_node_name(root) or node_name(root)


def join(root: Path, world: dict[str, Any], args: list[str]) -> int:
    config_path, ignored = _join_args(args)
    cfg = load_join_configuration(root / config_path.lstrip("/"))
    reg = cfg.get("nodeRegistration") or {}
    ignored |= {str(x).lower() for x in reg.get("ignorePreflightErrors") or []}
    name = node_name(root, reg.get("name"))
    failure = (world.get("failNext") or [None])[0]
    if failure is not None:
        world["failNext"] = world["failNext"][1:]

    print("[preflight] Running pre-flight checks")
    # app/preflight/checks.go, RunJoinNodeChecks: FileAvailableCheck for the kubeconfigs
    # join writes, and for the CA certificate only on a worker join (a control-plane
    # join's bootstrap data brings the CA files with it).
    files = (KUBELET_CONF, BOOTSTRAP_CONF) + (() if cfg.get("controlPlane") else (CA_CERT,))
    _files_available(root, files, failure, ignored,
                     manifests_dir_check(root, world.get("version", "v1.31.2")))

    endpoint = _discover(root, cfg, world)
    control_plane = cfg.get("controlPlane")
    if control_plane is not None:
        _control_plane_preflight(root, world, control_plane, ignored)
        _control_plane_prepare(root, world, control_plane, endpoint, name)

    # app/cmd/phases/join/kubelet.go, runKubeletStartJoinPhase: the bootstrap kubeconfig,
    # and the cluster CA from cluster-info when the node has none yet.
    _write_kubeconfig(root / BOOTSTRAP_CONF, _kubeconfig(endpoint, "tls-bootstrap-token-user"))
    if not (root / CA_CERT).exists():
        _write(root / CA_CERT, CA_PEM)
    try:
        if name in (world.get("readyNodes") or []):
            raise Failed(f"error execution phase kubelet-start: a Node with name "
                         f"{json.dumps(name)} and status \"Ready\" already exists in the "
                         "cluster. You must delete the existing Node or change the name of "
                         "this new joining Node")
        _write(root / KUBELET_CONFIG, "apiVersion: kubelet.config.k8s.io/v1beta1\n"
                                      "kind: KubeletConfiguration\n")
        _write(root / KUBELET_FLAGS, kubelet_flags(root, name, extra_args(reg)))
        print("[kubelet-start] Starting the kubelet")
        kubelet.start(root)
        if failure and failure.startswith("phase-error:"):
            _, phase, message = failure.split(":", 2)  # app/cmd/phases/workflow/runner.go
            raise Failed(f"error execution phase {phase}: {message}")
        if failure and failure.startswith("hang:"):
            time.sleep(min(float(failure.split(":", 1)[1]), 60))
        if failure == "kubelet-unhealthy":
            _kubelet_unhealthy(world.get("version", "v1.31.2"))
        print("[kubelet-start] Waiting for the kubelet to perform the TLS Bootstrap")
        api = world.get("apiServer")
        credential = _issue(root, endpoint, api, name) if api else None
        _write_kubeconfig(root / KUBELET_CONF,
                          _kubeconfig(endpoint, "default-auth", api, credential))
        if failure == "killed-after:kubelet-conf":
            _killed_with_the_agent(world)
    finally:
        (root / BOOTSTRAP_CONF).unlink(missing_ok=True)
    if control_plane is not None:
        _control_plane_join(root, world, name)
    if api and credential and failure != "node-not-registered":
        _register_node(root, endpoint, api, credential, name)
    world.setdefault("joins", []).append(name)
    world.setdefault("readyNodes", []).append(name)
    if failure == "killed-after:registered":
        _killed_with_the_agent(world)
    print("\nThis node has joined the cluster:\n* Certificate signing request was sent to "
          "apiserver and a response was received.\n* The Kubelet was informed of the new "
          "secure connection details.")
    return 0


def _killed_with_the_agent(world: dict[str, Any]) -> None:
    """SIGKILL the agent that ran this kubeadm (its parent: the wrapper execs), then
    this process: the world is saved first, so the failure is consumed."""
    world_path = os.environ.get("KUBEADM_STANDIN_WORLD")
    if world_path:
        Path(world_path).write_text(json.dumps(world, indent=1))
    os.kill(os.getppid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


CA_PEM = "-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n"


def _control_plane_preflight(root: Path, world: dict[str, Any], control_plane: dict[str, Any],
                             ignored: set[str]) -> None:
    """app/cmd/phases/join/preflight.go runPreflight for a control plane:
    checkIfReadyForAdditionalControlPlane (a stable controlPlaneEndpoint in the cluster's
    ClusterConfiguration; without certificateKey, the shared certificates on disk:
    app/phases/certs/certs.go SharedCertificateExists), then the init checks
    (app/preflight/checks.go RunInitNodeChecks: FileAvailable for the static Pod
    manifests)."""
    problem = None
    if not (world.get("clusterConfiguration") or {}).get("controlPlaneEndpoint"):
        problem = ("unable to add a new control plane instance a cluster that doesn't have "
                   "a stable controlPlaneEndpoint address")
    elif not control_plane.get("certificateKey"):
        missing = next((c for c in SHARED_CERTS if not (root / PKI_DIR / c).exists()), None)
        if missing is not None:
            kind = "certificate" if missing.endswith((".crt", ".pub")) else "key"
            problem = (f"failure loading {kind} for {missing.rsplit('.', 1)[0]}: couldn't "
                       f"load the {kind} file /{PKI_DIR}/{missing}: open /{PKI_DIR}/"
                       f"{missing}: no such file or directory")
    if problem is not None:
        raise Failed("error execution phase preflight: \nOne or more conditions for hosting "
                     f"a new control plane instance is not satisfied.\n\n{problem}\n\n"
                     "Please ensure that:\n* The cluster has a stable controlPlaneEndpoint "
                     "address.\n* The certificates that must be shared among control plane "
                     "instances are provided.\n")
    print("[preflight] Running pre-flight checks before initializing the new control plane "
          "instance")
    _init_node_checks(root, ignored)


def _init_node_checks(root: Path, ignored: set[str]) -> None:
    """app/preflight/checks.go RunInitNodeChecks: the static Pod manifests must not exist
    (FileAvailable--etc-kubernetes-manifests-<name>.yaml)."""
    _files_available(root, MANIFESTS, None, ignored)


def _files_available(root: Path, files: Sequence[str], failure: str | None,
                     ignored: set[str], found: Sequence[tuple[str, str]] = ()) -> None:
    """app/preflight/checks.go FileAvailableCheck for each of `files`, after the errors
    of other checks (`found`), plus a failure the world injects
    (`preflight:CHECK:MESSAGE`); those not ignored end the run with Error.Error's
    wording."""
    errors = [*found, *((f"FileAvailable--{rel.replace('/', '-')}", f"/{rel} already exists")
                        for rel in files if (root / rel).exists())]
    if failure and failure.startswith("preflight:"):
        _, check, message = failure.split(":", 2)
        errors.append((check, message))
    fatal = [(c, m) for c, m in errors if "all" not in ignored and c.lower() not in ignored]
    if fatal:
        lines = "".join(f"\t[ERROR {c}]: {m}\n" for c, m in fatal)
        raise Failed("error execution phase preflight: [preflight] Some fatal errors "
                     f"occurred:\n{lines}[preflight] If you know what you are doing, you "
                     "can make a check non-fatal with `--ignore-preflight-errors=...`")


def _control_plane_prepare(root: Path, world: dict[str, Any], control_plane: dict[str, Any],
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
            _write(root / PKI_DIR / cert, CA_PEM if cert.endswith(".crt") else "key\n", 0o600)
    _control_plane_files(root, endpoint, name)


def _control_plane_files(root: Path, endpoint: str, name: str) -> None:
    """What kubeadm writes on a control plane besides the kubelet's files: the serving
    certificates (certs), the kubeconfig files (kubeconfig), the static Pod manifests
    (control-plane; etcd's in the etcd step)."""
    for cert in ("apiserver.crt", "apiserver.key", "apiserver-kubelet-client.crt",
                 "front-proxy-client.crt", "etcd/server.crt", "etcd/peer.crt"):
        _write(root / PKI_DIR / cert, CA_PEM, 0o600)
    for rel in CONTROL_PLANE_KUBECONFIGS:
        _write_kubeconfig(root / rel, _kubeconfig(endpoint, "kubernetes-admin"))
    for rel in MANIFESTS[1:]:
        _write(root / rel, f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: "
                           f"{Path(rel).stem}-{name}\n", 0o600)


def _control_plane_join(root: Path, world: dict[str, Any], name: str) -> None:
    """app/cmd/phases/join/controlplanejoin.go: etcd (the new member added to the stacked
    etcd cluster, app/phases/etcd/local.go CreateStackedEtcdStaticPodManifestFile), then
    mark-control-plane."""
    members = world.setdefault("etcdMembers", [])
    if name not in members:
        members.append(name)
    _write(root / ETCD_MANIFEST, f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd-{name}\n",
           0o600)
    print("[etcd] Announced new etcd member joining to the existing etcd cluster")
    print(f"[mark-control-plane] Marking the node {name} as control-plane")


def init(root: Path, world: dict[str, Any], args: list[str]) -> int:
    """`kubeadm init --config FILE` (app/cmd/init.go, phases in app/cmd/phases/init):
    preflight (RunInitNodeChecks), certs (the CA kept when the bootstrap data brought it),
    kubeconfig, etcd, control-plane, kubelet-start, wait-control-plane, upload-config (the
    ClusterConfiguration into the cluster, where a joining control plane reads the
    controlPlaneEndpoint), bootstrap-token (the InitConfiguration's tokens become known to
    discovery), then the kubelet's TLS bootstrap as for a join."""
    config_path, ignored = _join_args(args)
    init_cfg, cluster_cfg = load_init_configuration(root / config_path.lstrip("/"))
    reg = init_cfg.get("nodeRegistration") or {}
    ignored |= {str(x).lower() for x in reg.get("ignorePreflightErrors") or []}
    name = node_name(root, reg.get("name"))
    failure = (world.get("failNext") or [None])[0]
    if failure is not None:
        world["failNext"] = world["failNext"][1:]
    print(f"[init] Using Kubernetes version: {world.get('version', 'v1.31.2')}")
    print("[preflight] Running pre-flight checks")
    _files_available(root, MANIFESTS, failure, ignored)
    local = init_cfg.get("localAPIEndpoint") or {}
    endpoint = "https://" + str(cluster_cfg.get("controlPlaneEndpoint") or
                                f"{local.get('advertiseAddress', '127.0.0.1')}:"
                                f"{local.get('bindPort', 6443)}")
    if not (root / CA_CERT).exists():
        print("[certs] Generating \"ca\" certificate and key")
        _write(root / CA_CERT, CA_PEM)
    else:
        print("[certs] Using existing ca certificate authority")
    _control_plane_files(root, endpoint, name)
    _write(root / KUBELET_CONFIG, "apiVersion: kubelet.config.k8s.io/v1beta1\n"
                                  "kind: KubeletConfiguration\n")
    _write(root / KUBELET_FLAGS, kubelet_flags(root, name, extra_args(reg)))
    print("[kubelet-start] Starting the kubelet")
    kubelet.start(root)
    if failure and failure.startswith("phase-error:"):
        _, phase, message = failure.split(":", 2)
        raise Failed(f"error execution phase {phase}: {message}")
    if failure == "kubelet-unhealthy":
        _kubelet_unhealthy(world.get("version", "v1.31.2"))
    world["etcdMembers"] = [name]
    _write(root / ETCD_MANIFEST, f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd-{name}\n",
           0o600)
    world["clusterConfiguration"] = {k: v for k, v in cluster_cfg.items()
                                     if k not in ("apiVersion", "kind")}
    tokens = world.setdefault("tokens", {}) if world.get("tokens") is not None else None
    for entry in init_cfg.get("bootstrapTokens") or []:
        token_id, _, secret = str(entry.get("token", "")).partition(".")
        if tokens is not None and token_id:
            tokens[token_id] = secret
    if init_cfg.get("certificateKey"):
        world["uploadedCerts"] = {"key": init_cfg["certificateKey"]}
    api = world.get("apiServer")
    if api and tokens is not None:  # bootstrap-token phase: cluster-info, then signed
        print("[bootstrap-token] Creating the \"cluster-info\" ConfigMap in the "
              "\"kube-public\" namespace")
        publish_cluster_info(endpoint, api, tokens)
    credential = _issue(root, endpoint, api, name) if api else None
    _write_kubeconfig(root / KUBELET_CONF, _kubeconfig(endpoint, "default-auth", api, credential))
    if api and credential and failure != "node-not-registered":
        _register_node(root, endpoint, api, credential, name)
    world.setdefault("joins", []).append(name)
    world.setdefault("readyNodes", []).append(name)
    print("\nYour Kubernetes control-plane has initialized successfully!")
    return 0


def _kubelet_unhealthy(version: str) -> None:
    """kubeadm's kubelet health check failing, in the wording of its version."""
    fail_msg = ("This error is likely caused by:\n\t- The kubelet is not running\n\t- The "
                "kubelet is unhealthy due to a misconfiguration of the node in some way "
                "(required cgroups disabled)\n")
    if int(version.lstrip("v").split(".")[1]) >= 31:
        # app/util/apiclient/wait.go WaitForKubelet; app/cmd/phases/join/kubelet.go
        print("[kubelet-check] The kubelet is not healthy after 4m0.000580205s\n\n"
              "Unfortunately, an error has occurred:\n\tThe HTTP call equal to 'curl "
              "-sSL http://127.0.0.1:10248/healthz' returned error: Get "
              "\"http://127.0.0.1:10248/healthz\": context deadline exceeded\n\n" + fail_msg)
        raise Failed("error execution phase kubelet-start: The HTTP call equal to "
                     "'curl -sSL http://127.0.0.1:10248/healthz' returned error: Get "
                     "\"http://127.0.0.1:10248/healthz\": context deadline exceeded")
    # release-1.30 and older: app/util/apiclient/wait.go WaitForHealthyKubelet, its
    # TryRunCommand giving up (apimachinery wait.ExponentialBackoff: ErrWaitTimeout);
    # kubeadmJoinFailMsg of app/cmd/phases/join/kubelet.go.
    print("[kubelet-check] Initial timeout of 40s passed.")
    for _ in range(5):
        print("[kubelet-check] It seems like the kubelet isn't running or healthy.\n"
              "[kubelet-check] The HTTP call equal to 'curl -sSL http://localhost:10248/"
              "healthz' failed with error: Get \"http://localhost:10248/healthz\": dial tcp "
              "127.0.0.1:10248: connect: connection refused.")
    print("\nUnfortunately, an error has occurred:\n\ttimed out waiting for the condition\n\n"
          + fail_msg)
    raise Failed("error execution phase kubelet-start: timed out waiting for the condition")


def load_join_configuration(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as err:
        raise Failed(f"unable to read config from {str(path)!r} : {err}") from err
    docs = [d for d in yaml.safe_load_all(text) if d]
    found = [d for d in docs if isinstance(d, dict) and d.get("kind") == "JoinConfiguration"]
    if not found:
        raise Failed("no JoinConfiguration found in the supplied config")
    doc = found[0]
    api = str(doc.get("apiVersion", ""))
    if api in OLD_API_VERSIONS:  # app/util/config/common.go, validateSupportedVersion
        raise Failed(f"your configuration file uses an old API spec: {json.dumps(api)} (kind: "
                     f"\"JoinConfiguration\"). Please use kubeadm {OLD_API_VERSIONS[api]} "
                     "instead and run 'kubeadm config migrate --old-config old.yaml "
                     "--new-config new.yaml', which will write the new, similar spec using "
                     "a newer API version.")
    if api not in SCHEMAS:  # apimachinery's runtime.Scheme on an unregistered version
        raise Failed(f"no kind \"JoinConfiguration\" is registered for version \"{api}\" in "
                     "scheme \"k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme/"
                     "scheme.go:31\"")
    problems = list(_strict(doc, SCHEMAS[api], ""))
    if problems:
        # app/util/config/strict/strict.go, VerifyUnmarshalStrict (kubeadm itself only
        # warns here unless validating; the stand-in is strict so that every config the
        # agent renders is proven schema-clean).
        group, version = api.split("/")
        raise Failed(f"error unmarshaling configuration schema.GroupVersionKind{{Group:"
                     f"\"{group}\", Version:\"{version}\", Kind:\"JoinConfiguration\"}}: "
                     f"strict decoding error: {', '.join(problems)}")
    discovery = doc.get("discovery") or {}
    if bool(discovery.get("bootstrapToken")) == bool(discovery.get("file")):
        # app/apis/kubeadm/validation/validation.go ValidateDiscovery: a field error list,
        # returned as an Aggregate before any phase runs: exit status 3.
        raise Failed("discovery: Invalid value: \"\": bootstrapToken or file must be set",
                     EXIT_VALIDATION)
    problem = unpinned_token_discovery(discovery.get("bootstrapToken"))
    if problem:
        raise Failed(problem, EXIT_VALIDATION)
    return doc


def load_init_configuration(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The InitConfiguration and ClusterConfiguration of `kubeadm init --config`
    (app/util/config/initconfiguration.go LoadInitConfigurationFromFile: documents by
    kind, strict per their version's schema, then validated)."""
    try:
        text = path.read_text()
    except OSError as err:
        raise Failed(f"unable to read config from {str(path)!r} : {err}") from err
    docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    found: dict[str, dict[str, Any]] = {}
    for doc in docs:
        kind, api = str(doc.get("kind", "")), str(doc.get("apiVersion", ""))
        if kind not in ("InitConfiguration", "ClusterConfiguration"):
            continue
        if api in OLD_API_VERSIONS:
            raise Failed(f"your configuration file uses an old API spec: {json.dumps(api)} "
                         f"(kind: \"{kind}\"). Please use kubeadm {OLD_API_VERSIONS[api]} "
                         "instead and run 'kubeadm config migrate --old-config old.yaml "
                         "--new-config new.yaml', which will write the new, similar spec "
                         "using a newer API version.")
        schemas = INIT_SCHEMAS if kind == "InitConfiguration" else CLUSTER_SCHEMAS
        if api not in schemas:
            raise Failed(f"no kind \"{kind}\" is registered for version \"{api}\" in scheme "
                         "\"k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme/"
                         "scheme.go:31\"")
        problems = _strict(doc, schemas[api], "")
        if problems:
            group, version = api.split("/")
            raise Failed(f"error unmarshaling configuration schema.GroupVersionKind{{Group:"
                         f"\"{group}\", Version:\"{version}\", Kind:\"{kind}\"}}: strict "
                         f"decoding error: {', '.join(problems)}")
        found[kind] = doc
    init_cfg = found.get("InitConfiguration", {})
    cluster_cfg = found.get("ClusterConfiguration", {})
    # app/apis/kubeadm/validation/validation.go ValidateInitConfiguration (an Aggregate)
    errors = []
    for i, entry in enumerate(init_cfg.get("bootstrapTokens") or []):
        token = str(entry.get("token", ""))
        if not _TOKEN.match(token):
            errors.append(f"bootstrapTokens[{i}].token: Invalid value: \"\": the bootstrap "
                          "token is invalid")
    endpoint = cluster_cfg.get("controlPlaneEndpoint")
    if endpoint is not None and not re.match(r"^[A-Za-z0-9.\-\[\]:]+(:\d+)?$", str(endpoint)):
        errors.append(f"controlPlaneEndpoint: Invalid value: {json.dumps(endpoint)}: "
                      "must be a valid host or host:port")
    if errors:
        raise Failed("[" + ", ".join(errors) + "]", EXIT_VALIDATION)
    return init_cfg, cluster_cfg


def _strict(value: Any, schema: Any, where: str) -> list[str]:
    if schema is _ANY:
        return []
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{where or 'JoinConfiguration'}: expected an object"]
        out: list[str] = []
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if key not in schema:
                out.append(f"unknown field \"{path}\"")
            elif item is not None:
                out.extend(_strict(item, schema[key], path))
        return out
    if isinstance(schema, list):
        if not isinstance(value, list):
            return [f"{where}: expected a list"]
        return [p for i, v in enumerate(value) for p in _strict(v, schema[0], f"{where}[{i}]")]
    if schema == "str:str":
        ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        return [] if ok else [f"{where}: expected a map of strings"]
    if schema is int and isinstance(value, bool):
        return [f"{where}: expected an integer"]
    return [] if isinstance(value, schema) else [f"{where}: expected {schema.__name__}"]


def _discover(root: Path, cfg: dict[str, Any], world: dict[str, Any]) -> str:
    # app/discovery/discovery.go wraps every discovery error like this.
    prefix = "error execution phase preflight: couldn't validate the identity of the API Server: "
    discovery = cfg.get("discovery") or {}
    token_cfg = discovery.get("bootstrapToken")
    if not token_cfg:
        try:
            return _discover_file(root, str(discovery["file"].get("kubeConfigPath", "")))
        except Failed as err:
            raise Failed(f"{prefix}{err}") from err
    endpoint = token_cfg.get("apiServerEndpoint", "")
    refused = _dial(endpoint)
    if refused:  # app/discovery/token/token.go, getClusterInfo
        raise Failed(f"{prefix}failed to request the cluster-info ConfigMap: Get \"https://"
                     f"{endpoint}/api/v1/namespaces/kube-public/configmaps/cluster-info?"
                     f"timeout=10s\": dial tcp {endpoint}: {refused}")
    token_id, _, secret = str(token_cfg.get("token", "")).partition(".")
    tokens = world.get("tokens")
    api = world.get("apiServer")
    if tokens is not None and api:
        try:
            _token_discovery(endpoint, token_id, secret, token_cfg, world, api)
        except Failed as err:
            raise Failed(f"{prefix}{err}") from err
        return f"https://{endpoint}"
    if tokens is not None and token_id not in tokens:  # token.go, getClusterInfo
        raise Failed(f"{prefix}could not find a JWS signature in the cluster-info ConfigMap "
                     f"for token ID \"{token_id}\"")
    if tokens is not None and tokens[token_id] != secret:  # validateClusterInfoToken
        raise Failed(f"{prefix}failed to verify JWS signature of received cluster info "
                     "object, can't trust this API Server")
    pin = world.get("caCertHash")
    if pin and pin not in (token_cfg.get("caCertHashes") or []):
        # app/util/pubkeypin/pubkeypin.go CheckAny, wrapped in token.go validateClusterCA
        raise Failed(f"{prefix}cluster CA found in cluster-info ConfigMap is invalid: none "
                     f"of the public keys \"{pin}\" are pinned")
    return f"https://{endpoint}"


CLUSTER_INFO = "/api/v1/namespaces/kube-public/configmaps/cluster-info"


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def jws_signature(payload: str, token_id: str, secret: str) -> str:
    """k8s.io/cluster-bootstrap/token/jws ComputeDetachedSignature: HS256 over the
    payload with the token's secret, `kid` the token ID, the payload left out
    ("header..signature")."""
    header = _b64url(json.dumps({"alg": "HS256", "kid": token_id},
                                separators=(",", ":")).encode())
    mac = hmac.new(secret.encode(), f"{header}.{_b64url(payload.encode())}".encode(),
                   hashlib.sha256).digest()
    return f"{header}..{_b64url(mac)}"


def publish_cluster_info(server: str, api: dict[str, str], tokens: dict[str, str]) -> None:
    """What the cluster serves for token discovery: the kube-public/cluster-info
    ConfigMap with the cluster's kubeconfig (its server and CA) and the RBAC that lets
    anyone read it (kubeadm init's bootstrap-token phase: app/phases/bootstraptoken/
    clusterinfo/clusterinfo.go CreateBootstrapConfigMapIfNotExists,
    CreateClusterInfoRBACRules), signed for every known token as kube-controller-
    manager's bootstrap signer does (pkg/controller/bootstrap/bootstrapsigner.go: one
    `jws-kubeconfig-<token id>` per token, none for an expired or deleted one)."""
    ca = Path(api["ca"]).read_text()
    data = cluster_info_data(server, ca, tokens)
    token = api["signerToken"]
    _api(server, ca, token, "POST", "/api/v1/namespaces",
         {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-public"}})
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"}, "data": data}
    status, doc = _api(server, ca, token, "POST", "/api/v1/namespaces/kube-public/configmaps",
                       body)
    if status == 409:  # published already (another node's join at the same time): renewed
        status, doc = _api(server, ca, token, "PUT", CLUSTER_INFO, body)
    if status not in (200, 201):
        raise Failed(f"publishing cluster-info: HTTP {status}: {doc.get('message')}")
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-public"
    # kubeadm names both "kubeadm:bootstrap-signer-clusterinfo"; the API stand-in checks
    # RBAC names as DNS subdomains (the real server takes path segment names), hence "-".
    name = "kubeadm-bootstrap-signer-clusterinfo"
    answers = [_api(server, ca, token, "POST", f"{rbac}/roles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "namespace": "kube-public"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                   "resourceNames": ["cluster-info"]}]}),
        _api(server, ca, token, "POST", f"{rbac}/rolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": "kube-public"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": name},
            "subjects": [{"kind": "User", "name": "system:anonymous"}]})]
    for status, doc in answers:
        if status not in (201, 409):
            raise Failed(f"publishing cluster-info's RBAC: HTTP {status}: {doc.get('message')}")


def cluster_info_data(server: str, ca: str, tokens: dict[str, str]) -> dict[str, str]:
    """cluster-info's data: the kubeconfig (app/phases/bootstraptoken/clusterinfo), one
    signature per token."""
    kubeconfig = yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "", "cluster": {
            "certificate-authority-data": base64.b64encode(ca.encode()).decode(),
            "server": server}}],
        "contexts": None, "current-context": "", "users": None})
    data = {"kubeconfig": kubeconfig}
    data.update({f"jws-kubeconfig-{tid}": jws_signature(kubeconfig, tid, sec)
                 for tid, sec in sorted(tokens.items())})
    return data


def _cluster_info(endpoint: str, ca: str | None) -> dict[str, str]:
    """token.go getClusterInfo: the ConfigMap, read anonymously; without `ca` over TLS
    that is not verified (the first, insecure fetch), with it verified."""
    url = f"https://{endpoint}{CLUSTER_INFO}?timeout=10s"
    if ca is None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(cadata=ca)
        context.check_hostname = False  # kubeadm dials the endpoint, the CA is pinned
    try:
        with urllib.request.urlopen(url, timeout=API_TIMEOUT, context=context) as resp:
            doc = json.loads(resp.read())
    except urllib.error.HTTPError as err:
        raise Failed(f"failed to request the cluster-info ConfigMap: configmaps "
                     f"\"cluster-info\" is forbidden: HTTP {err.code}") from err
    except (urllib.error.URLError, OSError) as err:
        raise Failed(f"failed to request the cluster-info ConfigMap: Get \"{url}\": "
                     f"{getattr(err, 'reason', err)}") from err
    data = doc.get("data") or {}
    return {str(k): str(v) for k, v in data.items()}


def _token_discovery(endpoint: str, token_id: str, secret: str, token_cfg: dict[str, Any],
                     world: dict[str, Any], api: dict[str, str]) -> None:
    """app/discovery/token/token.go retrieveValidatedConfigInfo against the cluster's API
    (the world's API stand-in): cluster-info read without TLS verification, its JWS
    signature for the token checked with the token's secret (validateClusterInfoToken),
    the CA in its kubeconfig checked against caCertHashes (validateClusterCA: the
    world's `caCertHash` stands for the CA's public key pin when it is set), then read
    again over TLS verified with that CA and compared."""
    server, tokens = f"https://{endpoint}", world.get("tokens") or {}
    try:
        info: dict[str, str] | None = _cluster_info(endpoint, None)
    except Failed:
        info = None  # not published yet
    if info != cluster_info_data(server, Path(api["ca"]).read_text(), tokens):
        # the cluster's side, when its tokens changed (the bootstrap signer's work)
        publish_cluster_info(server, api, tokens)
        info = _cluster_info(endpoint, None)
    kubeconfig = info.get("kubeconfig")
    if not kubeconfig:
        raise Failed("there is no kubeconfig key in the cluster-info ConfigMap. This API "
                     "Server isn't set up for token bootstrapping, can't connect")
    signature = info.get(f"jws-kubeconfig-{token_id}")
    if not signature:  # getClusterInfo's last error once its poll gives up
        raise Failed("could not find a JWS signature in the cluster-info ConfigMap for "
                     f"token ID \"{token_id}\"")
    if not hmac.compare_digest(signature, jws_signature(kubeconfig, token_id, secret)):
        raise Failed("failed to verify JWS signature of received cluster info object, "
                     "can't trust this API Server")
    clusters = (yaml.safe_load(kubeconfig) or {}).get("clusters") or [{}]
    ca = base64.b64decode(clusters[0]["cluster"]["certificate-authority-data"]).decode()
    pins = [str(p) for p in token_cfg.get("caCertHashes") or []]
    if pins:
        actual = world.get("caCertHash") or spki_pin(ca)
        if actual not in pins:  # app/util/pubkeypin/pubkeypin.go CheckAny
            raise Failed(f"cluster CA found in cluster-info ConfigMap is invalid: none of "
                         f"the public keys \"{actual}\" are pinned")
        if _cluster_info(endpoint, ca).get("kubeconfig") != kubeconfig:
            raise Failed("the second kubeconfig from the cluster-info ConfigMap (using "
                         "validated TLS) was different from the first")


def spki_pin(ca_pem: str) -> str:
    """app/util/pubkeypin/pubkeypin.go Hash: sha256 of the certificate's
    SubjectPublicKeyInfo."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_pem_x509_certificate(ca_pem.encode())
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def _discover_file(root: Path, path: str) -> str:
    """File discovery (app/discovery/file/file.go, ValidateConfigInfo): the cluster of the
    kubeconfig, its CA embedded, and a TLS connection to its server verified with that CA
    by reading the cluster-info ConfigMap (Forbidden is fine: the TLS handshake was)."""
    try:  # client-go tools/clientcmd LoadFromFile
        doc = yaml.safe_load((root / path.lstrip("/")).read_text())
    except OSError as err:
        raise Failed(f"open {path}: {(err.strerror or str(err)).lower()}") from err
    except yaml.YAMLError as err:
        raise Failed(f"error loading config file \"{path}\": {err}") from err
    doc = doc if isinstance(doc, dict) else {}
    clusters = {c.get("name"): c.get("cluster") or {} for c in doc.get("clusters") or []
                if isinstance(c, dict)}
    if not clusters:
        raise Failed("the provided kubeconfig file must have at least one Cluster defined")
    # app/util/kubeconfig/kubeconfig.go GetClusterFromKubeConfig: the unnamed cluster, else
    # the current context's; EnsureCertificateAuthorityIsEmbedded refuses none.
    contexts = {c.get("name"): c.get("context") or {} for c in doc.get("contexts") or []
                if isinstance(c, dict)}
    name = "" if "" in clusters else (contexts.get(doc.get("current-context")) or {}).get(
        "cluster")
    cluster = clusters.get(name)
    if cluster is None:
        raise Failed("received nil value for Cluster")
    server = cluster.get("server")
    if not server:  # client-go tools/clientcmd/validation.go, validateClusterInfo
        raise Failed(f"invalid configuration: no server found for cluster \"{name}\"")
    if cluster.get("certificate-authority-data"):
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
    elif cluster.get("certificate-authority"):
        try:
            ca = (root / str(cluster["certificate-authority"]).lstrip("/")).read_text()
        except OSError as err:
            raise Failed("error while reading certificate authority file defined in "
                         f"kubeconfig: {err}") from err
    else:
        ca = None
    url = f"{server}/api/v1/namespaces/kube-public/configmaps/cluster-info?timeout=10s"
    hostport = server.removeprefix("https://").split("/", 1)[0]
    refused = _dial(hostport)
    why = f"dial tcp {hostport}: {refused}" if refused else _tls_problem(url, ca)
    if why:
        raise Failed(f"Abort reading the cluster-info ConfigMap after timeout of 5m0s: Get "
                     f"\"{url}\": {why}")
    return str(server)


def _tls_problem(url: str, ca: str | None) -> str | None:
    """None when the server's certificate verifies with `ca` (the system's when None),
    else Go's crypto/tls wording."""
    context = ssl.create_default_context(cadata=ca) if ca else ssl.create_default_context()
    try:
        with urllib.request.urlopen(url, timeout=API_TIMEOUT, context=context):
            return None
    except urllib.error.HTTPError as err:
        return None if err.code in (200, 403) else f"HTTP {err.code}"
    except urllib.error.URLError as err:
        if isinstance(err.reason, ssl.SSLCertVerificationError):
            return ("tls: failed to verify certificate: x509: certificate signed by unknown "
                    "authority")
        return str(err.reason)


def _dial(endpoint: str) -> str | None:
    """None when a TCP connection to host:port opens, else Go's net error wording."""
    host, _, port = endpoint.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=API_TIMEOUT).close()
    except TimeoutError:
        return "i/o timeout"
    except (OSError, ValueError) as err:
        why = (err.strerror if isinstance(err, OSError) else None) or str(err)
        return f"connect: {why.lower()}"
    return None


def _join_args(args: list[str]) -> tuple[str, set[str]]:
    config: str | None = None
    ignored: set[str] = set()
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if name in ("--config", "--ignore-preflight-errors") and not eq:
            value = args.pop(0) if args else ""
        if name == "--config":
            config = value
        elif name == "--ignore-preflight-errors":
            ignored |= {v.lower() for v in value.split(",") if v}
        elif name not in ("--v", "-v"):
            raise Failed(f"unknown flag: {name}")
    if not config:
        raise Failed("the stand-in joins only with --config")
    return config, ignored


def _kubeconfig(server: str, user: str, api: dict[str, str] | None = None,
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


def _api(server: str, ca: str, credential: str | Path, method: str, path: str,
         body: dict[str, Any] | None = None,
         content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
    """One request to the workload API stand-in; `ca` is its CA certificate (PEM);
    `credential` a bearer token, or the file of a client certificate and its key."""
    headers = {"Content-Type": content_type}
    if isinstance(credential, str):
        headers["Authorization"] = f"Bearer {credential}"
    request = urllib.request.Request(
        f"{server}{path}", method=method,
        data=json.dumps(body).encode() if body is not None else None, headers=headers)
    context = ssl.create_default_context(cadata=ca)
    if isinstance(credential, Path):
        context.load_cert_chain(credential)
    try:
        with urllib.request.urlopen(request, timeout=API_TIMEOUT, context=context) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")
    except OSError as err:
        raise Failed(f"error execution phase kubelet-start: {method} {server}{path}: "
                     f"{err}") from err


def _issue(root: Path, server: str, api: dict[str, str], name: str) -> Path:
    """The kubelet's TLS bootstrap: a client certificate for system:node:<name> (group
    system:nodes) signed by the cluster (the API stand-in's CSR signer hook), stored as
    the kubelet stores it (machine_agent_sandbox.kubeadm.tls_bootstrap); its file."""
    status, doc = _api(server, Path(api["ca"]).read_text(), api["signerToken"], "POST",
                       "/sandbox/v1/certificates",
                       {"user": f"system:node:{name}", "groups": ["system:nodes"]})
    if status != 201:
        raise Failed("error execution phase kubelet-start: error waiting for the kubelet "
                     f"to perform the TLS Bootstrap: HTTP {status}: {doc.get('message')}")
    return tls_bootstrap.store(root, str(doc["certificate"]), str(doc["key"]))


REGISTRATIONS = "kubeadm-standin.machine-agent.test/registrations"
"""The Node's annotation counting the joins that registered it: written by the same
request that registers, so a kubeadm killed right after still counts (the world file is
saved only when kubeadm ends)."""


def registrations(node: dict[str, Any] | None) -> int:
    """How many joins registered this Node (0: none, or no Node)."""
    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    return int(annotations.get(REGISTRATIONS, "0"))


def _register_node(root: Path, server: str, api: dict[str, str], credential: Path,
                   name: str) -> None:
    """What the kubelet does once it runs: register its Node (with the --provider-id its
    flags carry; an existing one is taken over, pkg/kubelet/kubelet_node_status.go
    tryRegisterWithAPIServer), then post its
    status, NotReady until the runtime finds a CNI configuration."""
    ca = Path(api["ca"]).read_text()
    status, doc = _api(server, ca, credential, "POST", "/api/v1/nodes", {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                              "kubernetes.io/os": "linux"},
                     "annotations": {REGISTRATIONS: "1"}},
        # pkg/kubelet/kubelet_node_status.go initialNode: --provider-id
        **({"spec": {"providerID": provider}}
           if (provider := kubelet_flag(root, "provider-id")) else {})})
    for _ in range(5):  # bounded: only this node's kubelet writes its Node
        if status != 409:
            break
        status, doc = _api(server, ca, credential, "GET", f"/api/v1/nodes/{name}")
        if status == 200:  # taken over: one more join registered it (resourceVersion
            # makes the count a compare-and-swap)
            status, doc = _api(server, ca, credential, "PATCH", f"/api/v1/nodes/{name}", {
                "metadata": {"resourceVersion": doc["metadata"]["resourceVersion"],
                             "annotations": {REGISTRATIONS: str(registrations(doc) + 1)}}},
                "application/merge-patch+json")
            status = 201 if status == 200 else status
    if status != 201:
        raise Failed(f"error execution phase kubelet-start: registering Node {name}: "
                     f"HTTP {status}: {doc.get('message')}")
    post_node_status(server, ca, credential, name, network_ready(root))


def kubelet_sync(root: Path, posted: dict[str, str]) -> None:
    """One look of the running kubelet of the node under `root`: once it has joined and a
    CNI configuration is in place, post its Node Ready (again after a new join).
    `posted` holds, per root, the kubelet.conf it was posted with. A stopped kubelet
    (kubeadm reset stops it) posts nothing."""
    try:
        conf = (root / KUBELET_CONF).read_text()
    except OSError:
        posted.pop(str(root), None)
        return
    if not kubelet.running(root):
        posted.pop(str(root), None)
        return
    if posted.get(str(root)) == conf or not network_ready(root):
        return
    try:
        if kubelet_ready(root):
            posted[str(root)] = conf
    except (Failed, OSError, LookupError, ValueError):
        pass  # not registered (yet), or the API is away: the next look tries again


def kubelet_ready(root: Path) -> bool:
    """Post Ready for the kubelet of the node under `root`; False when the node has not
    joined."""
    try:
        conf = yaml.safe_load((root / KUBELET_CONF).read_text())
    except OSError:
        return False
    name = kubelet_node_name(root)
    if name is None:
        return False
    cluster, user = conf["clusters"][0]["cluster"], conf["users"][0]["user"] or {}
    credential = tls_bootstrap.credential_file(root, user)
    if "certificate-authority-data" not in cluster or credential is None:
        return False
    post_node_status(cluster["server"],
                     base64.b64decode(cluster["certificate-authority-data"]).decode(),
                     credential, name, True)
    return True


def network_ready(root: Path) -> bool:
    """The container runtime's NetworkReady: a CNI configuration file is in place."""
    conf_dir = root / CNI_CONF_DIR
    return conf_dir.is_dir() and any(
        p.suffix in (".conf", ".conflist", ".json") for p in conf_dir.iterdir())


_NO_PRESSURE = (("MemoryPressure", "KubeletHasSufficientMemory",
                 "kubelet has sufficient memory available"),
                ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"))
"""The pressure conditions a healthy kubelet posts with Ready (nodestatus/setters.go)."""


def post_node_status(server: str, ca: str, credential: str | Path, name: str,
                     ready: bool) -> None:
    """The kubelet's Ready condition and its pressure conditions, none under pressure
    (pkg/kubelet/nodestatus/setters.go ReadyCondition, MemoryPressureCondition, ...)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status"} if ready else {
        "type": "Ready", "status": "False", "reason": "KubeletNotReady",
        "message": "container runtime network not ready: NetworkReady=false "
                   "reason:NetworkPluginNotReady message:Network plugin returns error: "
                   "cni plugin not initialized"}
    condition.update(lastHeartbeatTime=now, lastTransitionTime=now)
    conditions = [{"type": kind, "status": "False", "reason": reason, "message": message,
                   "lastHeartbeatTime": now, "lastTransitionTime": now}
                  for kind, reason, message in _NO_PRESSURE]
    status, doc = _api(server, ca, credential, "PATCH", f"/api/v1/nodes/{name}/status",
                       {"status": {"conditions": [*conditions, condition]}},
                       "application/merge-patch+json")
    if status != 200:
        raise Failed(f"error execution phase kubelet-start: updating Node {name} status: "
                     f"HTTP {status}: {doc.get('message')}")


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as out:
        os.fchmod(fd, mode)  # an existing file keeps its mode otherwise
        out.write(text)


def _write_kubeconfig(path: Path, text: str) -> None:
    """As kubeadm writes kubeconfig files (kubeconfigutil.WriteToDisk, through client-go's
    clientcmd.WriteToFile): mode 0600, they hold a credential."""
    _write(path, text, 0o600)


def install(bin_dir: Path, root: Path, world: Path) -> None:
    """Write `kubeadm` and `kubelet` wrappers into bin_dir, bound to root and world."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    env = f"KUBEADM_STANDIN_ROOT='{root}' KUBEADM_STANDIN_WORLD='{world}'"
    for name, extra in (("kubeadm", ""), ("kubelet", " kubelet")):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\n{env} exec '{sys.executable}' -m "
                          f"machine_agent_sandbox.kubeadm_standin{extra} \"$@\"\n")
        script.chmod(0o755)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
