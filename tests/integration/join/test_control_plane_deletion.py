"""Deleting control-plane Machines: the etcd member is KubeadmControlPlane's to remove (its
kcp-cleanup hook; the order of the two hooks is agent.daemon.deletion's, tested in
tests/unit/daemon/test_delete_policy.py); the agent's own pre-terminate step resets the
node without touching etcd membership (kubeadm reset --skip-phases=remove-etcd-member).
A worker is reset as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from machine_agent_sandbox.testkit.bootstrap import (
    Flavour,
    cabpk_cloud_config,
    certificate_files,
    init_configuration,
    join_configuration,
)
from machine_agent_sandbox.testkit.node import ca_pin, joinable_cluster

from agent.daemon.deletion import DeletePolicy
from agent.ipam.base import PluginEnv
from agent.orchestrator import Orchestrator
from agent.report import Conditions
from agent.state import Journal
from tests.integration.join.conftest import Node, NoSleep
from tests.integration.join.test_cabpk_flavours import facts

TOKEN = "abcdef.0123456789abcdef"


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Node]]:
    from agent.host import Host

    base = tmp_path_factory.mktemp("d")
    with joinable_cluster(base, ("cp-0", "cp-1", "worker-0")) as (world, nodes):
        yield {name: Node(n.root, Host(n.root, clock=NoSleep(),
                                       env={"PATH": f"{n.path}:/usr/bin:/bin"}),
                          world.world_path, world.endpoint, NoSleep(), world.api)
               for name, n in nodes.items()}


def bootstrap(cluster: dict[str, Node]) -> None:
    endpoint, pin = cluster["cp-0"].endpoint, ca_pin(cluster["cp-0"].api)
    data = {
        "cp-0": Flavour("init", init_configuration(endpoint, "cp-0", TOKEN),
                        tuple(certificate_files())),
        "cp-1": Flavour("join", join_configuration(endpoint, "cp-1", TOKEN, pin,
                                                   control_plane=True),
                        tuple(certificate_files())),
        "worker-0": Flavour("join", join_configuration(endpoint, "worker-0", TOKEN, pin)),
    }
    for name, flavour in data.items():
        node = cluster[name]
        result, _ = node.run(node.configure({}), facts(name, cabpk_cloud_config(flavour),
                                                       "cloud-config", "v1.31.2"))
        assert result.ok, result.outcomes


def delete(node: Node, kcp_cleanup: bool = False) -> str:
    loaded = node.configure({}, lifecycle={"onDelete": {"removeCniConfig": False,
                                                        "releaseAddresses": False}})
    journal = Journal.load(node.host)
    policy = DeletePolicy(node.host, loaded.config, journal, Conditions(node.host, []),
                          lambda final: None, "uid", PluginEnv(node.host),
                          Orchestrator(loaded, node.host).results, kcp_cleanup)
    assert policy.run() is None
    return policy.conditions.get("KubeadmReset").message


def test_control_planes_are_reset_without_removing_their_etcd_member_workers_as_before(
        cluster: dict[str, Node]) -> None:
    bootstrap(cluster)
    world = cluster["cp-0"].world
    assert world["etcdMembers"] == ["cp-0", "cp-1"]
    message = delete(cluster["cp-1"])
    assert message == "kubeadm reset -f --skip-phases=remove-etcd-member undid the join"
    assert cluster["cp-1"].clean()
    # the member is left for KCP's kcp-cleanup; the reset never touched etcd
    assert cluster["cp-0"].world["etcdMembers"] == ["cp-0", "cp-1"]
    assert "etcdRemovedBy" not in cluster["cp-0"].world
    assert delete(cluster["worker-0"]) == "kubeadm reset -f undid the join"
    assert cluster["worker-0"].clean()


def test_a_control_plane_whose_machine_kcp_still_holds_is_left_running_for_kcp(
        cluster: dict[str, Node]) -> None:
    """KCP's kcp-cleanup hook on the Machine: KCP removes the etcd member with the node's
    kubelet and etcd working, after the agent's hook is off; the agent does not reset."""
    bootstrap(cluster)
    message = delete(cluster["cp-1"], kcp_cleanup=True)
    assert message.startswith("not reset: KubeadmControlPlane's hook")
    assert cluster["cp-1"].joined()
    assert "reset" not in cluster["cp-0"].world["invocations"]
    assert cluster["cp-0"].world["etcdMembers"] == ["cp-0", "cp-1"]
