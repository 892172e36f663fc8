"""The clusters of the sandbox: the API stand-in as its own process in the router
namespace, once as the management cluster (HTTPS, the real CRDs, the in-cluster IPAM pool
controller) and once as the workload cluster the nodes join (where their kubelets
register their Nodes); an admin client that reaches each from outside that namespace,
and the objects a node needs.

Seeded as Cluster API and CABPK would leave them: a Cluster, per node a Machine whose
`spec.readinessGates` names the agent's summary condition, the bootstrap data Secret in
CABPK's cloud-config shape, an InClusterIPPool, and a ServiceAccount token bound to
exactly the shipped node RBAC.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.errors import PermanentError
from agent.kube.rbac import NodeIdentity, render_node_rbac
from agent.report import SUMMARY
from machine_agent_sandbox.cleanup import Registry
from machine_agent_sandbox.netns import (
    GATEWAY,
    MANAGEMENT_ADDRESS,
    MANAGEMENT_PORT,
    WORKLOAD_ADDRESS,
    WORKLOAD_PORT,
)
from machine_agent_sandbox.testkit.bootstrap import TOKEN, bootstrap_secret, cloud_config

Obj = dict[str, Any]
NAMESPACE, CLUSTER, POOL = "demo", "demo", "demo-pool"
POOL_RANGE = "192.0.2.10-192.0.2.200"
CAPI = "cluster.x-k8s.io/v1beta2"
IPAM = "ipam.cluster.x-k8s.io"
START_WAIT = 20.0
TOKEN_SECONDS = 3600
"""Lifetime of a node's ServiceAccount token (TokenRequest)."""


class _Connection(http.client.HTTPSConnection):
    """HTTPS to an address, from inside a network namespace this process is not in (when
    `netns` is set), verifying the certificate against `server_name`."""

    def __init__(self, netns: str | None, host: str, port: int, server_name: str,
                 context: ssl.SSLContext, timeout: float) -> None:
        super().__init__(host, port, context=context, timeout=timeout)
        self._netns = netns
        self._server_name = server_name
        self._tls = context

    def connect(self) -> None:
        if self._netns is None:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        else:
            from pyroute2 import netns

            sock = netns.create_socket(self._netns, socket.AF_INET, socket.SOCK_STREAM,
                                       flags=0)
            sock.settimeout(self.timeout)
            sock.connect((self.host, self.port))
        self.sock = self._tls.wrap_socket(sock, server_hostname=self._server_name)


@dataclass
class Admin:
    """Raw API access as an administrator: what `kubectl` would see. The stand-in is
    reached inside the router namespace; an external server from this process's own."""

    host: str
    port: int
    netns: str | None
    ca: Path | None
    """The server's CA (None: the system's trust store)."""
    token: str | None = field(default=None, repr=False)
    cert: tuple[str, str] | None = None
    """A client certificate and key (files), as kind's admin kubeconfig has."""
    server_name: str | None = None
    """The name the server's certificate holds, when not `host`."""
    ns: str = NAMESPACE
    """The namespace the sandbox's objects live in."""
    timeout: float = 10.0

    @property
    def external(self) -> bool:
        return self.netns is None

    @property
    def tls_name(self) -> str:
        return self.server_name or self.host

    def call(self, method: str, path: str, body: Any = None, *,
             content_type: str = "application/json", ok: tuple[int, ...] = (200, 201)) -> Any:
        context = ssl.create_default_context(cafile=str(self.ca) if self.ca else None)
        if self.cert:
            context.load_cert_chain(*self.cert)
        conn = _Connection(self.netns, self.host, self.port, self.tls_name, context,
                           self.timeout)
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None,
                         headers=headers)
            response = conn.getresponse()
            text = response.read().decode()
        finally:
            conn.close()
        if response.status not in ok:
            raise PermanentError(f"{method} {path}: {response.status} {text[:300]}")
        return json.loads(text) if text else {}

    def create(self, path: str, body: Obj) -> Obj:
        result: Obj = self.call("POST", path, body)
        return result

    def machine(self, name: str) -> Obj:
        """The Machine as `kubectl get machine NAME -o yaml` shows it."""
        result: Obj = self.call("GET", f"/apis/{CAPI}/namespaces/{self.ns}/machines/{name}")
        return result

    def node(self, name: str) -> Obj | None:
        """The Node as `kubectl get node NAME -o yaml` shows it (on the workload
        cluster); None when there is none."""
        found: Obj = self.call("GET", f"/api/v1/nodes/{name}", ok=(200, 404))
        return found if found.get("kind") == "Node" else None

    def claims(self) -> list[Obj]:
        items: list[Obj] = self.call(
            "GET", f"/apis/{IPAM}/v1beta2/namespaces/{self.ns}/ipaddressclaims")["items"]
        return items


def start_standin(registry: Registry, router: str) -> Admin:
    """The management stand-in on MANAGEMENT_ADDRESS:MANAGEMENT_PORT in the router
    namespace, once it answers."""
    admin = _spawn(registry, router, "apiserver", MANAGEMENT_ADDRESS, MANAGEMENT_PORT, [])
    admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": NAMESPACE}})
    return admin


def start_workload(registry: Registry, router: str) -> Admin:
    """The workload cluster's API (a second stand-in, its own CA) on
    WORKLOAD_ADDRESS:WORKLOAD_PORT in the router namespace, once it answers."""
    return _spawn(registry, router, "workload-apiserver", WORKLOAD_ADDRESS, WORKLOAD_PORT,
                  ["--no-ipam"])


def _spawn(registry: Registry, router: str, name: str, address: str, port: int,
           extra: list[str]) -> Admin:
    state = registry.base / name
    state.mkdir()
    log = registry.base / f"{name}.log"
    registry.spawn(["ip", "netns", "exec", router, sys.executable, "-m",
                    "machine_agent_sandbox.apiserver", "--host", address, "--port", str(port),
                    "--state-dir", str(state), *extra], log)
    kubeconfig = state / "admin.kubeconfig"
    deadline = time.monotonic() + START_WAIT
    while not kubeconfig.exists():
        if time.monotonic() > deadline:
            raise PermanentError(f"the API stand-in {name} did not start within "
                                 f"{START_WAIT:g}s: {log.read_text()[-800:]}")
        time.sleep(0.05)
    doc = yaml.safe_load(kubeconfig.read_text())
    return Admin(address, port, router, state / "ca.crt", doc["users"][0]["user"]["token"])


def seed_cluster(admin: Admin, *, pool: list[str]) -> None:
    """The Cluster and the IPAM pool the Machines draw from."""
    admin.create(f"/apis/{CAPI}/namespaces/{admin.ns}/clusters", {
        "apiVersion": CAPI, "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": admin.ns},
        "spec": {"controlPlaneEndpoint": {"host": "203.0.113.10", "port": 6443}}})
    admin.create(f"/apis/{IPAM}/v1alpha2/namespaces/{admin.ns}/inclusterippools", {
        "apiVersion": f"{IPAM}/v1alpha2", "kind": "InClusterIPPool",
        "metadata": {"name": POOL, "namespace": admin.ns},
        "spec": {"addresses": pool, "prefix": 24, "gateway": GATEWAY}})


def take_address(admin: Admin, name: str) -> None:
    """Another Machine's claim on the pool (what a full pool looks like)."""
    admin.create(f"/apis/{IPAM}/v1beta2/namespaces/{admin.ns}/ipaddressclaims", {
        "apiVersion": f"{IPAM}/v1beta2", "kind": "IPAddressClaim",
        "metadata": {"name": name, "namespace": admin.ns},
        "spec": {"poolRef": {"apiGroup": IPAM, "kind": "InClusterIPPool", "name": POOL}}})


def seed_machine(admin: Admin, machine: str, endpoint: str, *, token: str = TOKEN,
                 ipam_claims: tuple[tuple[str, str], ...] = ()) -> str:
    """A Machine (CAPI's own Ready False, the agent's readiness gate), its bootstrap
    Secret, the node's ServiceAccount bound by the shipped RBAC (with rights on the
    IPAddressClaims of `ipam_claims`, (interface, family) claimed with the capi plugin);
    returns a token for it from the TokenRequest API."""
    secret = f"{machine}-bootstrap"
    base = f"/apis/{CAPI}/namespaces/{admin.ns}"
    created = admin.create(f"{base}/machines", {
        "apiVersion": CAPI, "kind": "Machine",
        "metadata": {"name": machine, "namespace": admin.ns,
                     "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
        "spec": {"clusterName": CLUSTER, "version": "v1.31.2",
                 "bootstrap": {"dataSecretName": secret},
                 "readinessGates": [{"conditionType": SUMMARY}],
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                       "kind": "Metal3Machine", "name": machine}}})
    admin.call("PATCH", f"{base}/machines/{machine}/status?fieldManager=capi-machine-"
               "controller&force=true", {
                   "apiVersion": CAPI, "kind": "Machine",
                   "metadata": {"name": machine, "namespace": admin.ns},
                   "status": {"conditions": [{
                       "type": "Ready", "status": "False", "reason": "NotReady",
                       "message": "waiting for the node",
                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
               content_type="application/apply-patch+yaml")
    admin.create(f"/api/v1/namespaces/{admin.ns}/secrets", bootstrap_secret(
        admin.ns, secret, cloud_config(endpoint, token, node_ip=None),
        labels={"cluster.x-k8s.io/cluster-name": CLUSTER}))
    account = f"machine-agent-{machine}"
    grant(admin, node_identity(admin, machine, created["metadata"]["uid"], ipam_claims))
    admin.create(f"/api/v1/namespaces/{admin.ns}/serviceaccounts", {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": account, "namespace": admin.ns}})
    issued = admin.create(f"/api/v1/namespaces/{admin.ns}/serviceaccounts/{account}/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": TOKEN_SECONDS}})
    return str(issued["status"]["token"])


def node_identity(admin: Admin, machine: str, uid: str,
                  ipam_claims: tuple[tuple[str, str], ...] = (), *,
                  config: str = "") -> NodeIdentity:
    """The node of `machine` as the shipped RBAC names it: its Machine, bootstrap Secret,
    ServiceAccount, IPAddressClaims and, with `config`, its AgentConfig ConfigMap."""
    return NodeIdentity(admin.ns, machine, CLUSTER, f"{machine}-bootstrap",
                        f"machine-agent-{machine}", machine_uid=uid, ipam_claims=ipam_claims,
                        config_kind="configmap" if config else "", config_name=config)


def grant(admin: Admin, identity: NodeIdentity) -> None:
    """The shipped node RBAC (templates/rbac/node-rbac.yaml) for `identity`: its Role
    and RoleBinding created, or replaced when the node has them already."""
    base = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{admin.ns}"
    for doc in yaml.safe_load_all(render_node_rbac(identity)):
        plural = "roles" if doc["kind"] == "Role" else "rolebindings"
        made = admin.call("POST", f"{base}/{plural}", doc, ok=(201, 409))
        if made.get("kind") == "Status":  # 409: it exists
            admin.call("PUT", f"{base}/{plural}/{doc['metadata']['name']}", doc)
