"""kubeadm's discovery: the cluster-info ConfigMap (published signed for each bootstrap
token, read anonymously, its JWS signature and CA pin checked), or a kubeconfig file."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from machine_agent_sandbox.kubeadm.kubelet_start import api_request
from machine_agent_sandbox.kubeadm.node import API_TIMEOUT, Failed


def discover(root: Path, cfg: dict[str, Any], world: dict[str, Any]) -> str:
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
    api_request(server, ca, token, "POST", "/api/v1/namespaces",
         {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-public"}})
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"}, "data": data}
    status, doc = api_request(server, ca, token, "POST",
                              "/api/v1/namespaces/kube-public/configmaps", body)
    if status == 409:  # published already (another node's join at the same time): renewed
        status, doc = api_request(server, ca, token, "PUT", CLUSTER_INFO, body)
    if status not in (200, 201):
        raise Failed(f"publishing cluster-info: HTTP {status}: {doc.get('message')}")
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-public"
    # kubeadm names both "kubeadm:bootstrap-signer-clusterinfo"; the API stand-in checks
    # RBAC names as DNS subdomains (the real server takes path segment names), hence "-".
    name = "kubeadm-bootstrap-signer-clusterinfo"
    answers = [api_request(server, ca, token, "POST", f"{rbac}/roles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "namespace": "kube-public"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                   "resourceNames": ["cluster-info"]}]}),
        api_request(server, ca, token, "POST", f"{rbac}/rolebindings", {
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
