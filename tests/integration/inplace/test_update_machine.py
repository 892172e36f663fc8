"""UpdateMachine carried out through the Machine's AgentConfig ConfigMap, against the API
stand-in, with the request Cluster API v1.14 sent (recorded) and the node's answer played
by setting the Machine's AgentConfigApplied as the daemon does (agent.daemon.reconfigure:
the message names the content by its digest). And the hooks over HTTPS."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from machine_agent_sandbox.apiserver import ApiServer
from machine_agent_sandbox.testkit.certs import good_serving_cert, make_ca, pem

from agent.inplace.hooks import path_of
from agent.inplace.server import make_server
from agent.inplace.update import update_machine
from agent.kube.client import Client
from agent.kube.kubeconfig import Credentials
from agent.kube.machine_config import ConfigRef, content_digest

RECORDED = json.loads((Path(__file__).parents[2] / "fixtures/real-capi/in-place-updates.json")
                      .read_text())["scenarios"]
NS, MACHINE, CONFIGMAP = "default", "workers-a-1", "workers-agent-config"
MACHINES = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{NS}/machines"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiServer]:
    with ApiServer(tmp_path / "api", controllers=False, ipam=False) as server:
        yield server


@pytest.fixture
def client(api: ApiServer) -> Client:
    return Client(Credentials(api.url, token=api.admin_token, ca_file=str(api.ca_path)))


def update_request(servers: list[str]) -> dict[str, Any]:
    """The UpdateMachine request Cluster API sent, for this test's Machine, its
    KubeadmConfig asking for `servers`."""
    call = next(c for c in RECORDED["in-place"]["hook_calls"]
                if c["path"].endswith("update-machine"))
    request = copy.deepcopy(call["request"])
    request["desired"]["machine"]["metadata"].update(name=MACHINE, namespace=NS)
    request["desired"]["bootstrapConfig"]["spec"]["ntp"] = {"enabled": True,
                                                           "servers": servers}
    return request


def machine(client: Client, annotation: str | None = f"configmap/{CONFIGMAP}") -> None:
    client.create(MACHINES, {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": MACHINE, "namespace": NS, "annotations": {
            "machine-agent.io/config": annotation} if annotation else {}},
        "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "s"},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                       "kind": "DockerMachine", "name": MACHINE}}})


def agent_reports(client: Client, status: str, message: str) -> None:
    client.request("PATCH", f"{MACHINES}/{MACHINE}/status", body={"status": {"conditions": [
        {"type": "AgentConfigApplied", "status": status, "reason": "Reconfigured",
         "message": message, "lastTransitionTime": "2026-12-05T06:00:00Z"}]}},
        content_type="application/merge-patch+json")


def configmap_text(client: Client) -> str:
    return str(client.get(f"{CONFIGMAPS}/{CONFIGMAP}")["data"]["config.yaml"])


def test_the_desired_servers_reach_the_agents_config_and_success_waits_for_the_agent(
        client: Client) -> None:
    machine(client)
    client.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": CONFIGMAP, "namespace": NS},
                               "data": {"config.yaml": yaml.safe_dump({
                                   "apiVersion": "machine-agent.io/v1alpha1",
                                   "kind": "AgentConfig", "spec": {"time": {"servers": [
                                       {"host": "203.0.113.123", "iburst": True}]},
                                       "cni": {"check": {"enabled": False}}}})}})
    request = update_request(["203.0.113.123", "198.51.100.123"])
    first = update_machine(request, client)
    assert first["status"] == "Success" and first["retryAfterSeconds"] > 0  # in progress
    written = yaml.safe_load(configmap_text(client))
    assert written["spec"]["time"]["servers"] == [{"host": "203.0.113.123", "iburst": True},
                                                  {"host": "198.51.100.123"}]
    assert written["spec"]["cni"] == {"check": {"enabled": False}}  # the rest kept
    version = client.get(f"{CONFIGMAPS}/{CONFIGMAP}")["metadata"]["resourceVersion"]
    assert update_machine(request, client)["retryAfterSeconds"] > 0  # asked again: waits
    assert client.get(f"{CONFIGMAPS}/{CONFIGMAP}")["metadata"]["resourceVersion"] == version
    # the daemon applied it: its condition names the content (agent.daemon.reconfigure)
    label = ConfigRef("configmap", NS, CONFIGMAP, MACHINE).source(
        client.get(f"{CONFIGMAPS}/{CONFIGMAP}")).label
    agent_reports(client, "True", f"{label} applied to network, time, join")
    done = update_machine(request, client)
    assert done["status"] == "Success" and done["retryAfterSeconds"] == 0


def test_a_change_the_agent_refused_is_a_failure_with_the_agents_reason(
        client: Client) -> None:
    machine(client)
    request = update_request(["198.51.100.123"])
    update_machine(request, client)  # creates the ConfigMap the annotation names
    digest = content_digest(configmap_text(client))
    agent_reports(client, "False", f"configmap {NS}/{CONFIGMAP} ({digest}): time: "
                  "TimeSyncFailed: no server answered (198.51.100.123); fix spec.time.servers")
    answer = update_machine(request, client)
    assert answer["status"] == "Failure"
    assert "refused the change and kept the previous configuration" in answer["message"]
    assert "TimeSyncFailed: no server answered (198.51.100.123)" in answer["message"]


def test_an_earlier_report_about_other_content_is_not_taken_for_this_one(
        client: Client) -> None:
    machine(client)
    agent_reports(client, "True", "configmap default/workers-agent-config "
                                  "(config sha256:000000000000) applied to time")
    assert update_machine(update_request(["198.51.100.7"]), client)["retryAfterSeconds"] > 0


def test_a_machine_without_an_agent_config_object_fails_naming_the_fix(
        client: Client) -> None:
    machine(client, annotation=None)
    answer = update_machine(update_request(["198.51.100.123"]), client)
    assert answer["status"] == "Failure"
    assert "machine-agent.io/config" in answer["message"] and "RBAC" in answer["message"]


@pytest.mark.allow_processes
def test_the_hooks_are_served_over_https(client: Client, tmp_path: Path) -> None:
    ca = make_ca("extension-ca")
    cert, key = good_serving_cert(ca, tmp_path)
    (tmp_path / "ca.crt").write_bytes(pem(ca.cert))
    server = make_server("127.0.0.1", 0, str(cert), str(key), client)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    base = f"https://127.0.0.1:{server.server_address[1]}"
    try:
        found = requests.post(f"{base}/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery",
                              json={}, verify=str(tmp_path / "ca.crt"), timeout=10).json()
        assert found["kind"] == "DiscoveryResponse" and len(found["handlers"]) == 3
        call = next(c for c in RECORDED["in-place"]["hook_calls"]
                    if c["path"].endswith("can-update-machineset"))
        answer = requests.post(base + path_of("CanUpdateMachineSet"), json=call["request"],
                               verify=str(tmp_path / "ca.crt"), timeout=10).json()
        assert answer["kind"] == "CanUpdateMachineSetResponse"
        assert answer["status"] == "Success"
        bad = requests.post(base + path_of("UpdateMachine"), data=b"[1]",
                            verify=str(tmp_path / "ca.crt"), timeout=10)
        assert bad.status_code == 400
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
