"""The agent against a management cluster, with only the shipped RBAC: it finds its
Machine, reads what the Machine points at, and reports onto it — as `kubectl` shows it."""

from __future__ import annotations

import pytest
from machine_agent_sandbox.testkit.management import service_account_token

from agent.cli import main
from agent.host import Host
from agent.kube.reporter import MachineReporter
from agent.report import SENTINEL, Condition
from agent.session import open_session
from agent.state import Journal
from tests.integration.kube.conftest import (
    CAPI_MANAGER,
    CONFIGMAP,
    HOST_UUID,
    MACHINE,
    PHASE_CONDITIONS,
    Admin,
    Node,
    World,
    make_node,
    node_token,
    seed,
)


def assert_bootstrapped(admin: Admin) -> None:
    """The final state a user expects on the Machine: every phase True, the summary True,
    CAPI's own Ready untouched and still owned by CAPI."""
    machine = admin.machine()
    conditions = {c["type"]: c for c in machine["status"]["conditions"]}
    for kind in (*PHASE_CONDITIONS, "NodeBootstrapped"):
        assert conditions[kind]["status"] == "True", conditions[kind]
        assert conditions[kind]["observedGeneration"] == machine["metadata"]["generation"]
    assert conditions["NodeBootstrapped"]["reason"] == "Bootstrapped"
    assert conditions["Ready"] == {
        "type": "Ready", "status": "False", "reason": "NotReady",
        "message": "waiting for the node", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    managers = {m["manager"] for m in machine["metadata"]["managedFields"]
                if m.get("subresource") == "status"}
    assert {CAPI_MANAGER, "machine-agent"} <= managers


def test_run_reads_the_machine_and_reports_every_phase_onto_it(
        node: Node, admin: Admin, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(node.root), "run"]) == 0
    assert_bootstrapped(admin)
    reasons = sorted(e["reason"] for e in admin.events())
    assert reasons == sorted(["NetworkConfigured", "TimeSynchronized", "Joined",
                              "CNIInstalled", "Bootstrapped"])
    assert all(e["type"] == "Normal" and e["reportingController"] ==
               "machine-agent.io/machine-agent" for e in admin.events())
    assert (node.root / SENTINEL.lstrip("/")).exists()
    capsys.readouterr()
    assert main(["--root", str(node.root), "config", "show", "--origin",
                 "--from-machine"]) == 0
    shown = capsys.readouterr().out
    assert f'spec.time.maxOffset = "250ms"  # configmap {admin.ns}/{CONFIGMAP}' in shown
    assert "spec.retry.attempts = 4  # /etc/machine-agent/config.yaml" in shown


def test_machine_facts_come_from_the_machine_cluster_and_bootstrap_secret(
        node: Node, admin: Admin) -> None:
    host = Host(node.root)
    session = open_session(host)
    assert session.machine is not None
    facts = session.machine.facts
    assert (facts.namespace, facts.name, facts.cluster_name) == (admin.ns, MACHINE, "c1")
    assert facts.control_plane_endpoint == "203.0.113.10:6443"
    assert facts.kubernetes_version == "v1.31.2"
    assert facts.bootstrap_format == "cloud-config"
    assert facts.bootstrap_data is not None and "kubeadm join" in facts.bootstrap_data
    assert session.machine.version == "v1beta2"


def test_the_machine_is_discovered_by_the_host_uuid_label(
        world: World, admin: Admin) -> None:
    seed(admin, world, labels={"machine-agent.io/host-uuid": HOST_UUID})
    node = make_node(world, admin, node_token(admin, discovery=True),
                     by_uuid=True)
    assert main(["--root", str(node.root), "run"]) == 0
    assert_bootstrapped(admin)


def test_no_machine_with_this_uuid_is_a_clear_error(
        world: World, admin: Admin, capsys: pytest.CaptureFixture[str]) -> None:
    seed(admin, world, labels={"machine-agent.io/host-uuid": "another-host"})
    node = make_node(world, admin, node_token(admin, discovery=True),
                     by_uuid=True)
    assert main(["--root", str(node.root), "run"]) == 1
    err = capsys.readouterr().err
    assert f"label machine-agent.io/host-uuid={HOST_UUID} in namespace {admin.ns}: " \
           "none matches" in err


def test_without_the_rbac_the_agent_says_forbidden(
        world: World, admin: Admin, capsys: pytest.CaptureFixture[str]) -> None:
    """A ServiceAccount that no Role binds, its token from the TokenRequest API."""
    seed(admin, world)
    node = make_node(world, admin, service_account_token(admin, "nobody"))
    assert main(["--root", str(node.root), "run"]) == 1
    err = capsys.readouterr().err
    assert "403 Forbidden" in err and "machines" in err
    assert "node-rbac.yaml" in err


def test_a_second_run_changes_nothing_on_the_machine(node: Node, admin: Admin) -> None:
    assert main(["--root", str(node.root), "run"]) == 0
    before = admin.machine()
    events = len(admin.events())
    assert main(["--root", str(node.root), "run"]) == 0
    after = admin.machine()
    assert after["status"]["conditions"] == before["status"]["conditions"]
    assert len(admin.events()) == events


def test_the_report_lands_after_another_manager_wrote_the_agents_conditions(
        node: Node, admin: Admin) -> None:
    """Another field manager (a person with kubectl, a controller) takes the agent's
    condition types between two reports: the agent's next report still lands (its apply
    is forced; unforced, the API server answers 409 FieldManagerConflict), and CAPI's
    Ready stays."""
    host = Host(node.root)
    session = open_session(host)
    assert session.machine is not None and session.client is not None
    reporter = MachineReporter(session.client, session.machine, Journal(host),
                               host=host, interval=0, final_attempts=1)

    def report(status: str, reason: str) -> None:
        reporter.publish([Condition("NetworkReady", status, reason,  # type: ignore[arg-type]
                                    "m", "2026-01-02T00:00:00Z")], final=True)
        assert not reporter.pending

    report("False", "NetworkConfiguring")
    admin.apply(session.machine.status_path, {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": MACHINE, "namespace": admin.ns},
        "status": {"conditions": [{
            "type": "NetworkReady", "status": "Unknown", "reason": "SetByHand",
            "message": "someone else", "lastTransitionTime": "2026-01-03T00:00:00Z"}]}},
        "someone-else")
    assert admin.conditions()["NetworkReady"]["reason"] == "SetByHand"
    report("True", "NetworkConfigured")
    conditions = admin.conditions()
    assert (conditions["NetworkReady"]["status"],
            conditions["NetworkReady"]["reason"]) == ("True", "NetworkConfigured")
    assert conditions["Ready"]["reason"] == "NotReady"
