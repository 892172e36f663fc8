"""The IPAM backends' test set-ups: the real NetBox and Nautobot started by
tests/integration/netbox/up.sh and nautobot/up.sh (never skipped: a missing server fails
the tests), and a
management cluster (the stand-in, whose pool controller plays the in-cluster provider, or
a real API server named by MACHINE_AGENT_TEST_KUBECONFIG, where the test plays the
provider) with a Cluster, a Machine and the node's shipped RBAC."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import yaml
from machine_agent_sandbox.apiserver import ApiServer
from machine_agent_sandbox.pools import PoolClient
from machine_agent_sandbox.testkit.faultproxy import FaultProxy
from machine_agent_sandbox.testkit.management import service_account_token

from agent.kube.client import Client
from agent.kube.facts import MachineFacts
from agent.kube.kubeconfig import Credentials
from agent.kube.rbac import NodeIdentity, render_node_rbac
from agent.retry import Backoff
from tests.integration.kube import conftest as kube
from tests.integration.kube.conftest import CLUSTER, MACHINE, SECRET, Admin
from tests.integration.nautobot.world import Nautobot, running_nautobot
from tests.integration.netbox import nbapi

NETBOX_ENV = Path(os.environ.get("NETBOX_HOME", "/var/tmp/machine-agent-netbox")) / "env"
UP = "sudo bash tests/integration/netbox/up.sh"
admin = kube.admin


@dataclass(frozen=True)
class NetBox:
    url: str
    token: str
    env: dict[str, str]

    def addresses(self, **params: str) -> list[dict[str, object]]:
        """IP addresses as NetBox shows them (checked against the claim key field)."""
        session = requests.Session()
        session.trust_env = False
        r = session.get(f"{self.url}/api/ipam/ip-addresses/",
                        params={**params, "limit": "1000"}, timeout=10,
                        headers={"Authorization": f"Bearer {self.token}"})
        r.raise_for_status()
        return list(r.json()["results"])


def read_netbox_env() -> NetBox:
    """The running test NetBox, or a test failure that says how to start it."""
    if not NETBOX_ENV.exists():
        pytest.fail(f"NetBox is not up: {NETBOX_ENV} does not exist; run `{UP}` first "
                    "(CI does it in .ci/services.d/netbox.sh)", pytrace=False)
    env = dict(line.split("=", 1) for line in NETBOX_ENV.read_text().splitlines()
               if "=" in line and not line.startswith("#"))
    try:
        session = requests.Session()
        session.trust_env = False
        answer = session.get(f"{env['NETBOX_URL']}/api/status/", timeout=10,
                             headers={"Authorization": f"Bearer {env['NETBOX_TOKEN']}"})
    except requests.RequestException as err:
        pytest.fail(f"NetBox is not up at {env['NETBOX_URL']} ({type(err).__name__}); "
                    f"run `{UP}`", pytrace=False)
    if answer.status_code != 200:
        pytest.fail(f"NetBox at {env['NETBOX_URL']} answered {answer.status_code} to "
                    f"/api/status/; run `{UP}`", pytrace=False)
    return NetBox(env["NETBOX_URL"], env["NETBOX_TOKEN"], env)


@pytest.fixture
def nautobot() -> Iterator[Nautobot]:
    """The real Nautobot, its test prefixes empty before and after."""
    server = running_nautobot()
    server.reset()
    yield server
    server.reset()


@pytest.fixture
def netbox() -> Iterator[NetBox]:
    """The real NetBox, with the test allocations cleared before and after."""
    server = read_netbox_env()
    nbapi.reset(server.url, server.token)
    yield server
    nbapi.reset(server.url, server.token)


@dataclass
class Management:
    """A namespace with a Cluster and a Machine, and the node's client (shipped RBAC)."""

    admin: Admin
    standin: ApiServer | None
    machine: MachineFacts
    client: Client
    token: str
    global_suffix: str

    def pool(self, name: str, addresses: list[str], prefix: int, gateway: str | None = None,
             kind: str = "InClusterIPPool") -> str:
        """Create a pool; its name (global pools get a suffix: they are cluster-wide)."""
        if kind == "GlobalInClusterIPPool":
            name = f"{name}-{self.global_suffix}"
        spec: dict[str, object] = {"addresses": addresses, "prefix": prefix}
        if gateway:
            spec["gateway"] = gateway
        base = "/apis/ipam.cluster.x-k8s.io/v1alpha2"
        path = (f"{base}/globalinclusterippools" if kind == "GlobalInClusterIPPool"
                else f"{base}/namespaces/{self.admin.ns}/inclusterippools")
        self.admin.create(path, {"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": kind,
                                 "metadata": {"name": name}, "spec": spec})
        return name

    def client_with(self, token: str, timeout: float = 5, via: FaultProxy | None = None
                    ) -> Client:
        """The node's client with `token`, to the server or through the proxy `via`."""
        server, ca = self.admin.server, self.admin.verify
        if via is not None:
            server, ca = via.url, str(via.ca_path)
        return Client(Credentials(server, token=token,
                                  ca_file=ca if isinstance(ca, str) else None),
                      timeout=timeout, backoff=Backoff(0.01, 0.05, 2))

    def claims(self) -> list[dict[str, object]]:
        return list(self.admin.call(
            "GET", f"/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/{self.admin.ns}"
                   "/ipaddressclaims")["items"])


@pytest.fixture
def management(standin: ApiServer | None, admin: Admin) -> Iterator[Management]:
    ns, capi = admin.ns, f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{admin.ns}"
    admin.create(f"{capi}/clusters", {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": ns},
        "spec": {"controlPlaneEndpoint": {"host": "203.0.113.10", "port": 6443}}})
    machine = admin.create(f"{capi}/machines", {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": MACHINE, "namespace": ns},
        "spec": {"clusterName": CLUSTER, "bootstrap": {"dataSecretName": SECRET},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                       "kind": "Metal3Machine", "name": MACHINE}}})
    sa = f"machine-agent-{MACHINE}"
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}"
    for doc in yaml.safe_load_all(render_node_rbac(NodeIdentity(
            ns, MACHINE, CLUSTER, SECRET, sa, machine_uid=machine["metadata"]["uid"],
            ipam_claims=(("n0", "ipv4"),)))):  # test_run_namespace's node
        plural = "roles" if doc["kind"] == "Role" else "rolebindings"
        admin.create(f"{rbac}/{plural}", doc)
    # The plugin tests claim under keys of their own (not the node's Machine UID, interface
    # and family the shipped Role names): they are let at every claim of the namespace.
    admin.create(f"{rbac}/roles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "ipam-plugin-tests"},
        "rules": [{"apiGroups": ["ipam.cluster.x-k8s.io"], "resources": ["ipaddressclaims"],
                   "verbs": ["get", "list", "watch", "delete"]}]})
    admin.create(f"{rbac}/rolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "ipam-plugin-tests"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "ipam-plugin-tests"},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]})
    token = service_account_token(admin, sa)
    facts = MachineFacts(ns, MACHINE, machine["metadata"]["uid"], CLUSTER)
    world = Management(admin, standin, facts, Client(Credentials("")), token,
                       secrets.token_hex(3))
    world.client = world.client_with(token)
    if standin is not None:
        yield world
        return
    with PoolClient(admin):  # a real API server: the test plays the provider
        yield world
