"""Doctor on a node of a management cluster (the stand-in, with exactly the shipped
RBAC): a healthy node passes and nothing changes — not a file under the root, not an
object on the API; each broken piece is named with its fix and exits 1."""

from __future__ import annotations

import socket

import pytest

from agent.cli import main
from tests.integration.doctor.conftest import (
    api_objects,
    by_name,
    doctor,
    failing,
    install_cni,
    tree,
)
from tests.integration.kube.conftest import MACHINE, Admin, Node


@pytest.fixture
def bootstrapped(node: Node, capsys: pytest.CaptureFixture[str]) -> Node:
    install_cni(node.root)
    assert main(["--root", str(node.root), "run"]) == 0
    return node


def test_healthy_node_passes_and_doctor_changes_nothing(
        bootstrapped: Node, admin: Admin, capsys: pytest.CaptureFixture[str]) -> None:
    root_before, api_before = tree(bootstrapped.root), api_objects(admin)
    code, doc = doctor(bootstrapped.root, capsys=capsys)
    assert (tree(bootstrapped.root), api_objects(admin)) == (root_before, api_before)
    assert failing(doc) == [], doc
    assert code == 0 and doc["exitCode"] == 0 and doc["format"] == 1
    checks = by_name(doc)
    for key in [("config", "valid"), ("management", "reachable"), ("management", "tls"),
                ("management", "credentials"), ("management", "rbac:get:machines"),
                ("management", "rbac:patch:machines/status"),
                ("management", "rbac:patch:machines"), ("management", "machine"),
                ("management", "bootstrap-secret"), ("management", "machine-config"),
                ("join", "source"), ("join", "node"), ("cni", "conflist"),
                ("cni", "plugin:bridge"), ("journal", "journal"), ("journal", "conditions"),
                ("journal", "reported")]:
        assert checks[key]["status"] == "pass", checks[key]
    assert MACHINE in checks[("management", "machine")]["seen"]
    # The kubeadm stand-in's workload cluster publishes cluster-info signed for its tokens
    # (kubeadm's discovery): the token is checked there.
    token = checks[("management", "bootstrap-token")]
    assert token["status"] == "pass" and "known to the workload cluster" in token["seen"]


def test_text_output_is_one_line_per_check_grouped_by_phase(
        bootstrapped: Node, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["--root", str(bootstrapped.root), "doctor", "--phase", "management",
                 "--phase", "journal"]) == 0
    lines = capsys.readouterr().out.splitlines()
    phases = [line.split()[1] for line in lines[:-1]]
    assert set(phases) == {"management", "journal"}
    assert phases == sorted(phases, key=["management", "journal"].index)
    assert lines[0].startswith("PASS  management reachable: ")
    assert "passed" in lines[-1]


def test_api_down_names_the_reachable_check(
        bootstrapped: Node, admin: Admin, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    path = bootstrapped.root / "etc/machine-agent/management.kubeconfig"
    path.write_text(path.read_text().replace(admin.server, f"https://127.0.0.1:{closed}"))
    code, doc = doctor(bootstrapped.root, capsys=capsys)
    assert code == 1
    reachable = by_name(doc)[("management", "reachable")]
    assert reachable["status"] == "fail" and "cannot connect" in reachable["seen"]
    assert "route, firewall" in reachable["fix"]
    assert by_name(doc)[("management", "machine")]["seen"].startswith("not checked")


def test_wrong_token_names_the_credentials_check(
        bootstrapped: Node, capsys: pytest.CaptureFixture[str]) -> None:
    path = bootstrapped.root / "etc/machine-agent/management.kubeconfig"
    text = path.read_text()
    start = text.index("token: ") + len("token: ")
    path.write_text(text[:start] + "not-a-valid-token" + text[text.index("\n", start):])
    code, doc = doctor(bootstrapped.root, capsys=capsys)
    assert code == 1
    assert failing(doc) == [("management", "credentials")]
    creds = by_name(doc)[("management", "credentials")]
    assert "401 Unauthorized" in creds["seen"] and "valid token or kubeconfig" in creds["fix"]


def test_missing_rbac_names_each_verb_and_the_template(
        bootstrapped: Node, admin: Admin, capsys: pytest.CaptureFixture[str]) -> None:
    admin.call("DELETE", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{admin.ns}/roles/"
                         f"machine-agent-{MACHINE}")
    code, doc = doctor(bootstrapped.root, capsys=capsys)
    assert code == 1
    failed = failing(doc)
    assert ("management", "rbac:get:machines") in failed
    assert ("management", "machine") in failed
    rbac = by_name(doc)[("management", "rbac:get:machines")]
    assert "may not get machines" in rbac["seen"]
    assert "node-rbac.yaml" in rbac["fix"]


def test_corrupt_journal_names_the_journal_check(
        bootstrapped: Node, capsys: pytest.CaptureFixture[str]) -> None:
    (bootstrapped.root / "var/lib/machine-agent/journal.json").write_text("{not json")
    before = tree(bootstrapped.root)
    code, doc = doctor(bootstrapped.root, capsys=capsys)
    assert tree(bootstrapped.root) == before
    assert code == 1
    journal = by_name(doc)[("journal", "journal")]
    assert journal["status"] == "fail" and "unreadable" in journal["seen"]
    assert "aside" in journal["fix"]


def test_the_cni_manifest_configmap_permission_is_reviewed_and_required_on_control_planes(
        node: Node, admin: Admin, capsys: pytest.CaptureFixture[str]) -> None:
    node.write("/etc/machine-agent/config.d/cni.yaml",
               "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"
               "spec: {cni: {manifest: {configMapRef: {name: cni-manifest}}}}\n")

    def review() -> list[tuple[str, str]]:
        _code, doc = doctor(node.root, capsys=capsys)
        return [(c["status"], c["seen"]) for c in doc["checks"]
                if "spec.cni.manifest.configMapRef" in c["seen"]]

    seen = (f"may not get configmaps {admin.ns}/cni-manifest (the CNI manifest of "
            "spec.cni.manifest.configMapRef)")
    # the shipped RBAC was rendered without it: a worker never reads it, so only a warning
    [(status, message)] = review()
    assert status == "warn" and message.startswith(seen)
    admin.apply(f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{admin.ns}/machines/{MACHINE}",
                {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                 "metadata": {"name": MACHINE, "namespace": admin.ns,
                              "labels": {"cluster.x-k8s.io/control-plane": ""}}}, "kcp")
    [(status, message)] = review()
    assert status == "fail" and message.startswith(seen)
