"""A rotated token file is used without a restart: on a 401 the client reads the token
file again and sends the request once more with the new token (client-go's cached file
token source does the same, which is how projected service account tokens rotate). A
credential that stays refused fails at once as ManagementUnauthorized, with one read of
the file per refusal, not a loop.

Against the stand-in or the server MACHINE_AGENT_TEST_KUBECONFIG names: tokens come from
the TokenRequest API, and a token expires as a deleted ServiceAccount's does."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from machine_agent_sandbox.testkit.management import (
    revoke_service_account,
    service_account_token,
)

from agent.config.management import ManagementSpec
from agent.errors import AgentError
from agent.host import Host
from agent.kube.client import Client
from agent.kube.kubeconfig import load_credentials
from tests.integration.kube.conftest import Admin

PROBE = "probe"


def readable_probe(admin: Admin) -> str:
    """A ConfigMap every ServiceAccount of the test's namespace may read; its path."""
    ns, rbac = admin.ns, f"/apis/rbac.authorization.k8s.io/v1/namespaces/{admin.ns}"
    admin.create(f"/api/v1/namespaces/{ns}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": PROBE, "namespace": ns}})
    admin.create(f"{rbac}/roles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "probe-reader", "namespace": ns},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [PROBE],
                   "verbs": ["get"]}]})
    admin.create(f"{rbac}/rolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "probe-reader", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "probe-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                      "name": f"system:serviceaccounts:{ns}"}]})
    return f"/api/v1/namespaces/{ns}/configmaps/{PROBE}"


def spec_for(how: str, admin: Admin, host: Host) -> ManagementSpec:
    ca = Path(admin.verify).read_text() if isinstance(admin.verify, str) else ""
    if ca:
        host.write_file("/etc/machine-agent/ca.crt", ca)
    if how == "tokenFile":
        return ManagementSpec(server=admin.server, token_file="/var/run/token",
                              ca_file="/etc/machine-agent/ca.crt" if ca else None)
    cluster = {"server": admin.server, **({"certificate-authority": "ca.crt"} if ca else {})}
    host.write_file("/etc/machine-agent/management.kubeconfig", yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "m", "cluster": cluster}],
        "contexts": [{"name": "c", "context": {"cluster": "m", "user": "node"}}],
        "users": [{"name": "node", "user": {"tokenFile": "/var/run/token"}}]}))
    return ManagementSpec(kubeconfig="/etc/machine-agent/management.kubeconfig")


@pytest.mark.parametrize("how", ["tokenFile", "kubeconfig user tokenFile"])
def test_a_rotated_token_file_is_picked_up_without_a_restart(admin: Admin, tmp_path: Path,
                                                             how: str) -> None:
    probe = readable_probe(admin)
    host = Host(tmp_path / "root")
    first = service_account_token(admin, "node-a")
    host.write_file("/var/run/token", first + "\n")
    client = Client(load_credentials(spec_for(how, admin, host), host))
    assert client.get(probe)["metadata"]["name"] == PROBE
    revoke_service_account(admin, "node-a", first)  # expired
    second = service_account_token(admin, "node-b")
    host.write_file("/var/run/token", second + "\n")  # the kubelet projected a new one
    assert client.get(probe)["metadata"]["name"] == PROBE
    assert client.headers["Authorization"] == f"Bearer {second}"


def test_an_expired_token_that_is_not_rotated_fails_at_once_as_unauthorized(
        admin: Admin, tmp_path: Path) -> None:
    probe = readable_probe(admin)
    host = Host(tmp_path / "root")
    token = service_account_token(admin, "node-a")
    host.write_file("/var/run/token", token + "\n")
    client = Client(load_credentials(spec_for("tokenFile", admin, host), host))
    assert client.get(probe)["metadata"]["name"] == PROBE
    revoke_service_account(admin, "node-a", token)
    with pytest.raises(AgentError) as info:
        client.get(probe)
    assert info.value.reason == "ManagementUnauthorized" and not info.value.temporary
