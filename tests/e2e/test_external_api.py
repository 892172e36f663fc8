"""The e2e suite against an external management API server (MACHINE_AGENT_TEST_KUBECONFIG),
proved without a real cluster: the API stand-in run as an independent server on the
machine's loopback, as kind's would be, with only its admin kubeconfig handed over (no
pool controller: a cluster with just the CRDs has no IPAM provider). So the external path
cannot rot while no CI job has a real cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from machine_agent_sandbox.cluster import Admin
from machine_agent_sandbox.external import admin_from_kubeconfig, missing_resources
from machine_agent_sandbox.sandbox import Sandbox

from tests.e2e.conftest import assert_bootstrapped, data_addresses

pytestmark = pytest.mark.allow_processes
REPO = Path(__file__).parents[2]
START_WAIT = 20.0


@pytest.fixture
def external(tmp_path: Path) -> Iterator[Path]:
    """An API server of its own (the stand-in as a separate process on 127.0.0.1, a free
    port); its admin kubeconfig."""
    state = tmp_path / "apiserver"
    log = tmp_path / "apiserver.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "machine_agent_sandbox.apiserver", "--host", "127.0.0.1",
             "--port", "0", "--state-dir", str(state), "--no-ipam"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        kubeconfig = state / "admin.kubeconfig"
        deadline = time.monotonic() + START_WAIT
        while not kubeconfig.exists():
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield kubeconfig
    finally:
        server.terminate()
        server.wait(timeout=10)


def as_admin(kubeconfig: Path, tmp_path: Path, namespace: str) -> Admin:
    return admin_from_kubeconfig(kubeconfig, tmp_path / "material", namespace)


def namespace_exists(admin: Admin) -> bool:
    found = admin.call("GET", f"/api/v1/namespaces/{admin.ns}", ok=(200, 404))
    return bool(found.get("kind") == "Namespace")


def sandbox_processes(box_dir: Path) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
        except OSError:
            continue
        if str(box_dir).encode() in text:
            found.append(text.replace(b"\0", b" ").decode(errors="replace"))
    return found


def test_a_node_bootstraps_against_an_external_api_server_and_nothing_is_left_there(
        external: Path, tmp_path: Path) -> None:
    with Sandbox.up(1, external=external) as box:
        (node,) = box.nodes
        assert box.external and box.admin.netns is None
        code, lines = node.run("run")
        assert code == 0, "\n".join(lines)
        assert_bootstrapped(box, node)
        # The address came from the pool by the sandbox's pool client.
        assert data_addresses(box, node) == ["192.0.2.10/24"]
        (claim,) = box.admin.claims()
        assert claim["status"]["addressRef"]["name"] == claim["metadata"]["name"]
        # The node reached the server through the relay, verifying it by its own name.
        kubeconfig = yaml.safe_load((node.root / "etc/machine-agent/management.kubeconfig")
                                    .read_text())
        cluster = kubeconfig["clusters"][0]["cluster"]
        assert cluster["server"] == "https://198.51.100.1:6443"
        assert cluster["tls-server-name"] == "127.0.0.1"
        # What the agent reported is on the external server, in the sandbox's namespace.
        direct = as_admin(external, tmp_path, box.admin.ns)
        conditions = {c["type"]: c["status"] for c in
                      direct.machine(node.name)["status"]["conditions"]}
        assert conditions["NodeBootstrapped"] == "True"
        base = box.registry.base
    assert not namespace_exists(direct)
    assert sandbox_processes(base) == []


def test_a_failure_inside_the_sandbox_still_removes_its_namespace(
        external: Path, tmp_path: Path) -> None:
    namespace = ""
    with pytest.raises(RuntimeError, match="the test failed here"), \
            Sandbox.up(1, external=external) as box:
        namespace = box.admin.ns
        assert namespace_exists(box.admin)
        raise RuntimeError("the test failed here")
    assert namespace and not namespace_exists(as_admin(external, tmp_path, namespace))


class Discovery(Admin):
    """Discovery answers of a server that lacks some resources."""

    def __init__(self, served: dict[str, list[str]]) -> None:
        super().__init__("127.0.0.1", 1, None, None)
        self.served = served

    def call(self, method: str, path: str, body: Any = None, *,
             content_type: str = "application/json", ok: tuple[int, ...] = (200, 201)) -> Any:
        group_version = path.removeprefix("/apis/")
        if group_version not in self.served:
            return {"kind": "Status", "code": 404}
        return {"resources": [{"name": n} for n in self.served[group_version]]}


def test_missing_crds_are_named() -> None:
    everything = {"cluster.x-k8s.io/v1beta2": ["clusters", "machines", "machines/status"],
                  "ipam.cluster.x-k8s.io/v1alpha2": ["inclusterippools"],
                  "ipam.cluster.x-k8s.io/v1beta2": ["ipaddressclaims", "ipaddresses",
                                                    "ipaddressclaims/status"]}
    assert missing_resources(Discovery(everything)) == []
    no_ipam = {"cluster.x-k8s.io/v1beta2": everything["cluster.x-k8s.io/v1beta2"],
               "ipam.cluster.x-k8s.io/v1beta2": ["ipaddressclaims"]}
    assert missing_resources(Discovery(no_ipam)) == [
        "inclusterippools.ipam.cluster.x-k8s.io/v1alpha2",
        "ipaddresses.ipam.cluster.x-k8s.io/v1beta2",
        "ipaddressclaims/status.ipam.cluster.x-k8s.io/v1beta2"]


def test_the_bootstrap_suite_passes_in_external_mode(external: Path, tmp_path: Path) -> None:
    """tests/e2e/test_bootstrap.py's sandbox tests, run as a user would run them against a
    real cluster: MACHINE_AGENT_TEST_KUBECONFIG set, nothing else. (Its demo tests run
    the demo, which always brings its own stand-in.)"""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "not demo",
         "tests/e2e/test_bootstrap.py"], cwd=REPO, capture_output=True, text=True,
        timeout=300, env={**os.environ, "MACHINE_AGENT_TEST_KUBECONFIG": str(external)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
    # ... and against the external server: it made both tests' namespaces and Machines
    # (read with the stand-in's own counters: this server is one, whatever the suite saw).
    served = as_admin(external, tmp_path, "").call("GET", "/sandbox/v1/counters")
    made = {c["resource"]: c["count"] for c in served["counters"] if c["verb"] == "create"}
    assert made.get("namespaces", 0) >= 2 and made.get("machines", 0) >= 2, made


def test_the_demo_runs_its_node_against_the_cluster_of_a_kubeconfig(
        external: Path, tmp_path: Path) -> None:
    """`machine-agent demo --kubeconfig FILE`: the sandbox's node bootstraps against that
    server, in a namespace of its own that is gone afterwards."""
    demo = subprocess.run([sys.executable, "-m", "agent.cli", "demo", "--kubeconfig",
                           str(external)], capture_output=True, text=True, timeout=90)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    out = demo.stdout
    assert "(external" in out  # the management API named is the kubeconfig's server
    assert "as expected: NodeBootstrapped is True: the node bootstrapped" in out
    namespace = next(w for w in out.split() if w.startswith("ma-sandbox-"))
    assert not namespace_exists(as_admin(external, tmp_path, namespace))


def test_the_demo_names_a_missing_kubeconfig(tmp_path: Path) -> None:
    missing = tmp_path / "nope.kubeconfig"
    demo = subprocess.run([sys.executable, "-m", "agent.cli", "demo", "--kubeconfig",
                           str(missing)], capture_output=True, text=True, timeout=30)
    assert demo.returncode == 2
    assert f"--kubeconfig {missing}: no such file" in demo.stdout + demo.stderr
