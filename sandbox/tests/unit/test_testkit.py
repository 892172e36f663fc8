"""The test scaffolding is one kit (machine_agent_sandbox.testkit) that the tests, the
benchmarks and the sandbox share: the benchmarks never import the tests."""

from __future__ import annotations

import ast
import base64
from pathlib import Path

from machine_agent_sandbox.testkit.bootstrap import bootstrap_secret, cloud_config

from agent.phases.join.cloudconfig import parse_cloud_config

REPO = Path(__file__).parents[3]


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_benchmarks_import_the_kit_never_the_tests() -> None:
    found = {str(p.relative_to(REPO)): sorted(n for n in imported(p)
                                              if n == "tests" or n.startswith("tests."))
             for p in sorted((REPO / "bench").glob("*.py"))}
    assert {p: n for p, n in found.items() if n} == {}
    assert "machine_agent_sandbox.testkit.management" in imported(REPO / "bench/bootstrap.py")


def test_the_one_bootstrap_secret_holds_data_the_agent_reads() -> None:
    secret = bootstrap_secret("ns", "worker-0-bootstrap",
                              cloud_config("203.0.113.10:6443", node_ip=None))
    assert (secret["type"], secret["metadata"]["name"]) == ("cluster.x-k8s.io/secret",
                                                            "worker-0-bootstrap")
    data = base64.b64decode(secret["data"]["value"]).decode()
    parsed = parse_cloud_config(data, node_name="worker-0")
    assert parsed.join.sentinel
    assert [f.path for f in parsed.files] == ["/run/kubeadm/kubeadm-join-config.yaml",
                                              "/run/cluster-api/placeholder"]
    assert "kubeletExtraArgs" not in data
    assert "value: 192.0.2.20" in cloud_config("203.0.113.10:6443")
