"""An in-place update end to end on a node: the extension carries Cluster API's
UpdateMachine (the request its controllers sent, recorded, with this node's Machine and the
KubeadmConfig's ntp changed) into the Machine's AgentConfig ConfigMap; the node's daemon
applies it to its real chronyd with its trial and rollback and reports AgentConfigApplied;
the extension's next answer is Success, or Failure with the agent's reason after a rollback.
The node never joins again."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.host import Host
from agent.inplace.update import update_machine
from agent.kube.client import Client
from agent.kube.kubeconfig import Credentials
from agent.phases.join.result import JoinRecord
from agent.state import Journal
from tests.chronyd import chronyd, free_udp_ports, ntp_server, private_dir
from tests.integration.daemon.test_daemon_lifecycle import (
    Daemon,
    agent_config,
    is_true,
    set_config,
    wait_until,
)
from tests.integration.daemon.test_daemon_lifecycle import daemon as daemon  # the fixture
from tests.integration.kube.conftest import MACHINE, Admin, Node

RECORDED = json.loads((Path(__file__).parents[2] / "fixtures/real-capi/in-place-updates.json")
                      .read_text())["scenarios"]


def request_for(admin: Admin, servers: list[str]) -> dict[str, Any]:
    call = next(c for c in RECORDED["in-place"]["hook_calls"]
                if c["path"].endswith("update-machine"))
    request = copy.deepcopy(call["request"])
    request["desired"]["machine"]["metadata"].update(name=MACHINE, namespace=admin.ns)
    request["desired"]["bootstrapConfig"]["spec"]["ntp"] = {"enabled": True,
                                                           "servers": servers}
    return request


def extension_client(admin: Admin) -> Client:
    token = admin.headers.get("Authorization", "").removeprefix("Bearer ") or None
    cert, key = admin.cert or (None, None)
    return Client(Credentials(admin.server, token=token, client_cert=cert, client_key=key,
                              ca_file=admin.verify if isinstance(admin.verify, str) else None))


def until_answered(ask: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Cluster API's loop: ask again while the answer is "in progress" (bounded)."""
    def final() -> dict[str, Any] | None:
        answer = ask()
        done = answer["status"] == "Failure" or answer.get("retryAfterSeconds") == 0
        return answer if done else None
    return dict(wait_until(final, "the extension's final answer", timeout=60))


@pytest.fixture
def timed_node(daemon: Daemon, admin: Admin, node: Node,
               tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The node bootstrapped with its chronyd on a test NTP server (127.0.0.1:PORT)."""
    (ntp_port,) = free_udp_ports(1)
    run = private_dir(tmp_path_factory.mktemp("c") / "run")
    sources = node.root / "etc/chrony/sources.d"
    sources.mkdir(parents=True)
    client = run / "client.conf"
    client.write_text(f"sourcedir {sources}\nmakestep 1 3\ndriftfile {run}/drift\nport 0\n"
                      f"cmdport 0\nbindcmdaddress {run}/client.sock\n"
                      f"pidfile {run}/client.pid\n")
    set_config(admin, agent_config(
        f"  time:\n    servers:\n    - {{host: 127.0.0.1, port: {ntp_port}, minpoll: -2, "
        f"maxpoll: 0}}\n    syncTimeout: 4s\n    checkInterval: 200ms\n"
        f"    chrony: {{target: dropin, commandAddress: {run}/client.sock}}\n"))
    with ntp_server(run, ntp_port), chronyd(client):
        wait_until((run / "client.sock").exists, "the node's chronyd")
        daemon.start()
        wait_until(lambda: is_true(admin, "NodeBootstrapped"), "the bootstrap")
        yield sources / "machine-agent.sources"
        daemon.stop()


@pytest.mark.allow_processes
def test_an_ntp_change_is_applied_in_place_and_the_hook_answers_success(
        timed_node: Path, admin: Admin, node: Node, daemon: Daemon) -> None:
    joined = Journal.load(Host(node.root)).section(JoinRecord).attempts
    client = extension_client(admin)
    request = request_for(admin, ["127.0.0.1", "localhost"])
    answer = until_answered(lambda: update_machine(request, client))
    assert answer["status"] == "Success", answer
    assert "server localhost" in timed_node.read_text()  # chronyd has it
    assert Journal.load(Host(node.root)).section(JoinRecord).attempts == joined  # no new join
    assert update_machine(request, client)["retryAfterSeconds"] == 0  # asked again: done
    assert daemon.output().count("kubeadm join, attempt") == 1


@pytest.mark.allow_processes
def test_a_change_the_agent_refuses_keeps_the_running_config_and_the_hook_fails_with_why(
        timed_node: Path, admin: Admin, node: Node) -> None:
    """A server name the agent's validation refuses ("ntp server" is no host name): the
    change is refused whole, chronyd keeps its sources, and Cluster API learns why."""
    before = timed_node.read_text()
    client = extension_client(admin)
    request = request_for(admin, ["127.0.0.1", "ntp server"])
    answer = until_answered(lambda: update_machine(request, client))
    assert answer["status"] == "Failure", answer
    assert "refused the change and kept the previous configuration" in answer["message"]
    assert "spec.time.servers[1].host" in answer["message"]
    assert timed_node.read_text() == before
    assert is_true(admin, "NodeBootstrapped")  # the node stays up
