"""A rotated token file is used without a restart: on a 401 the client reads the token
file again and sends the request once more with the new token (client-go's cached file
token source does the same, which is how projected service account tokens rotate). A
credential that stays refused fails at once as ManagementUnauthorized, with one read of
the file per refusal, not a loop."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from machine_agent_sandbox.apiserver import ApiServer

from agent.config.management import ManagementSpec
from agent.errors import AgentError
from agent.host import Host
from agent.kube.client import Client
from agent.kube.kubeconfig import load_credentials


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiServer]:
    server = ApiServer(tmp_path / "api", ipam=False).start()
    try:
        yield server
    finally:
        server.stop()


def spec_for(how: str, api: ApiServer, host: Host) -> ManagementSpec:
    host.write_file("/etc/machine-agent/ca.crt", api.ca_path.read_text())
    if how == "tokenFile":
        return ManagementSpec(server=api.url, token_file="/var/run/token",
                              ca_file="/etc/machine-agent/ca.crt")
    host.write_file("/etc/machine-agent/management.kubeconfig", yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "m", "cluster": {"server": api.url,
                                               "certificate-authority": "ca.crt"}}],
        "contexts": [{"name": "c", "context": {"cluster": "m", "user": "node"}}],
        "users": [{"name": "node", "user": {"tokenFile": "/var/run/token"}}]}))
    return ManagementSpec(kubeconfig="/etc/machine-agent/management.kubeconfig")


@pytest.mark.parametrize("how", ["tokenFile", "kubeconfig user tokenFile"])
def test_a_rotated_token_file_is_picked_up_without_a_restart(api: ApiServer, tmp_path: Path,
                                                             how: str) -> None:
    host = Host(tmp_path / "root")
    first = api.make_token("system:node-agent", ["system:masters"])
    host.write_file("/var/run/token", first + "\n")
    client = Client(load_credentials(spec_for(how, api, host), host))
    assert client.get("/api/v1/namespaces/default")["metadata"]["name"] == "default"
    api.tokens.revoke(first)  # expired
    second = api.make_token("system:node-agent", ["system:masters"])
    host.write_file("/var/run/token", second + "\n")  # the kubelet projected a new one
    assert client.get("/api/v1/namespaces/default")["metadata"]["name"] == "default"
    assert client.headers["Authorization"] == f"Bearer {second}"


def test_an_expired_token_that_is_not_rotated_fails_at_once_as_unauthorized(
        api: ApiServer, tmp_path: Path) -> None:
    host = Host(tmp_path / "root")
    token = api.make_token("system:node-agent", ["system:masters"])
    host.write_file("/var/run/token", token + "\n")
    client = Client(load_credentials(spec_for("tokenFile", api, host), host))
    api.tokens.revoke(token)
    with pytest.raises(AgentError) as info:
        client.get("/api/v1/namespaces/default")
    assert info.value.reason == "ManagementUnauthorized" and not info.value.temporary
