"""Doctor on a node without a management cluster (bootstrap data from a file): the
join preflight as doctor shows it, a broken configuration, and what doctor does not
touch."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from machine_agent_sandbox.testkit.bootstrap import cloud_config
from machine_agent_sandbox.testkit.node import joinable

from tests.integration.doctor.conftest import by_name, doctor, failing, install_cni, tree

CONFIG = """apiVersion: machine-agent.io/v1alpha1
kind: AgentConfig
spec:
  join:
    bootstrapDataFile: /etc/machine-agent/bootstrap.yaml
    kubernetesVersion: v1.31.2
    nodeRegistration: {name: worker-0}
"""


@pytest.fixture
def local_node(tmp_path_factory: pytest.TempPathFactory,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A joinable root (not joined yet) configured from files; yields (root, tools bin)."""
    root = tmp_path_factory.mktemp("n")
    with joinable(root, tmp_path_factory.mktemp("t")) as join:
        monkeypatch.setenv("PATH", f"{join.path}:{os.environ['PATH']}")
        (root / "etc/machine-agent").mkdir(parents=True)
        (root / "etc/machine-agent/config.yaml").write_text(CONFIG)
        (root / "etc/machine-agent/bootstrap.yaml").write_text(cloud_config(join.endpoint))
        install_cni(root)
        yield root, join.path


def test_joinable_node_passes_every_preflight_check_and_nothing_changes(
        local_node: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = local_node
    before = tree(root)
    code, doc = doctor(root, capsys=capsys)
    assert tree(root) == before
    assert failing(doc) == [] and code == 0, doc
    checks = by_name(doc)
    for name in ("CRI", "FileExisting-kubeadm", "FileExisting-kubelet", "Swap",
                 "FileContent--proc-sys-net-ipv4-ip_forward", "Port-10250",
                 "APIServerReachable"):
        assert checks[("join", name)]["status"] == "pass", checks[("join", name)]
    assert checks[("management", "configured")]["status"] == "warn"


def test_kubeadm_missing_names_the_check_and_the_fix(
        local_node: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    root, tools = local_node
    (tools / "kubeadm").unlink()
    code, doc = doctor(root, "--phase", "join", capsys=capsys)
    assert code == 1
    assert failing(doc) == [("join", "FileExisting-kubeadm")]
    check = by_name(doc)[("join", "FileExisting-kubeadm")]
    assert check["seen"] == "kubeadm not found in system path"
    assert check["fix"] == "install kubeadm v1.31.2 or set spec.join.kubeadmPath"
    assert {c["phase"] for c in doc["checks"]} == {"join"}


def test_the_programs_are_asked_for_their_versions_side_by_side(
        local_node: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    # each program answers only once the other has started (or gives up after 10 s and
    # fails): asked one after the other, the first check would fail
    root, tools = local_node
    for name, other in (("kubeadm", "kubelet"), ("kubelet", "kubeadm")):
        (tools / name).rename(tools / f"{name}.real")
        (tools / name).write_text(
            f"#!/bin/sh\ntouch '{tools}/{name}.started'\ni=0\n"
            f"while [ ! -e '{tools}/{other}.started' ] && [ $i -lt 100 ]; do\n"
            f"  sleep 0.1; i=$((i + 1))\ndone\n"
            f"[ -e '{tools}/{other}.started' ] || exit 1\n"
            f"exec '{tools}/{name}.real' \"$@\"\n")
        (tools / name).chmod(0o755)
    code, doc = doctor(root, "--phase", "join", capsys=capsys)
    assert failing(doc) == [] and code == 0, doc
    for name in ("FileExisting-kubeadm", "FileExisting-kubelet"):
        assert by_name(doc)[("join", name)]["status"] == "pass"


def test_swap_on_names_the_swap_check(local_node: tuple[Path, Path],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = local_node
    (root / "proc/swaps").write_text("Filename\tType\tSize\tUsed\tPriority\n"
                                     "/swapfile\tfile\t1048572\t0\t-2\n")
    code, doc = doctor(root, capsys=capsys)
    assert code == 1 and failing(doc) == [("join", "Swap")]
    swap = by_name(doc)[("join", "Swap")]
    assert "/swapfile" in swap["seen"] and "swapoff -a" in swap["fix"]


def test_ignored_preflight_error_is_a_warning(local_node: tuple[Path, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = local_node
    (root / "proc/swaps").write_text("Filename\tType\tSize\tUsed\tPriority\n"
                                     "/swapfile\tfile\t1048572\t0\t-2\n")
    config = root / "etc/machine-agent/config.yaml"
    config.write_text(config.read_text().replace(
        "nodeRegistration: {name: worker-0}",
        "nodeRegistration: {name: worker-0, ignorePreflightErrors: [Swap]}"))
    code, doc = doctor(root, capsys=capsys)
    assert code == 0
    assert by_name(doc)[("join", "Swap")]["status"] == "warn"


def test_bad_config_is_a_failed_check_not_a_crash(local_node: tuple[Path, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = local_node
    (root / "etc/machine-agent/config.d").mkdir()
    (root / "etc/machine-agent/config.d/50-bad.yaml").write_text(
        "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"
        "spec:\n  time:\n    maxOffset: soon\n  nosuch: 1\n")
    code, doc = doctor(root, capsys=capsys)
    assert code == 1 and failing(doc) == [("config", "valid")]
    valid = by_name(doc)[("config", "valid")]
    assert "spec.time.maxOffset" in valid["seen"] and "spec.nosuch" in valid["seen"]
    assert "50-bad.yaml" in valid["seen"]
    assert "config validate" in valid["fix"]
    sources = by_name(doc)[("config", "sources")]
    assert "/etc/machine-agent/config.d/50-bad.yaml" in sources["details"]["files"]


def test_missing_root_could_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agent.cli import main

    assert main(["--root", str(tmp_path / "nowhere"), "doctor"]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_the_files_the_bootstrap_data_writes_are_no_sign_of_a_half_joined_node(
        local_node: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """CABPK writes the cluster's CA files on control planes: once the data's files are
    on the node (before kubeadm), doctor still sees a node that has not joined."""
    import yaml

    root, _ = local_node
    data = root / "etc/machine-agent/bootstrap.yaml"
    header, _, body = data.read_text().partition("#cloud-config\n")
    doc = yaml.safe_load(body)
    doc["write_files"].append({"path": "/etc/kubernetes/pki/ca.crt", "owner": "root:root",
                               "permissions": "0640", "content": "the cluster CA\n"})
    data.write_text(header + "#cloud-config\n" + yaml.safe_dump(doc, sort_keys=False,
                                                                width=10000))
    (root / "etc/kubernetes/pki").mkdir(parents=True)
    (root / "etc/kubernetes/pki/ca.crt").write_text("the cluster CA\n")
    _, report = doctor(root, "--phase", "join", capsys=capsys)
    checks = by_name(report)
    assert ("join", "node") in checks, report["checks"]
    node = checks[("join", "node")]
    assert (node["status"], node["seen"]) == (
        "pass", "not joined yet, nothing from an earlier attempt"), node
