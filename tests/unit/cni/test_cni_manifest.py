"""The CNI manifest: server-side applied to the workload cluster, then the wait for the
Node to be Ready, with progress. The workload API is a tiny local HTTP stub here (the
management API stand-in is being built separately); it answers discovery, records every
apply, and turns the Node Ready after a few looks."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from agent.config import load_config
from agent.config.sources import FileSource
from agent.host import Clock, Host
from agent.orchestrator import Orchestrator
from agent.phases.cni import CNIPhase
from agent.report import Condition
from tests.cni_fixtures import sha256, snapshot

MANIFEST = """\
apiVersion: v1
kind: ServiceAccount
metadata: {name: flannel, namespace: kube-flannel}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: flannel}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-flannel-cfg, namespace: kube-flannel}
data: {net-conf.json: '{"Network": "198.51.100.0/24"}'}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-flannel-ds, namespace: kube-flannel}
spec: {selector: {matchLabels: {app: flannel}}, template: {metadata: {labels: {app: flannel}},
       spec: {containers: [{name: kube-flannel, image: flannel:v0.26}]}}}
"""

RESOURCES = {
    "/api/v1": [("serviceaccounts", "ServiceAccount", True), ("configmaps", "ConfigMap", True),
                ("nodes", "Node", False), ("nodes/status", "Node", False)],
    "/apis/apps/v1": [("daemonsets", "DaemonSet", True)],
    "/apis/rbac.authorization.k8s.io/v1": [("clusterroles", "ClusterRole", False)],
}


class WorkloadStub:
    """Answers like a kube-apiserver for what the agent asks."""

    def __init__(self, ready_after: int) -> None:
        self.applied: list[dict[str, Any]] = []
        self.stored: dict[str, Any] = {}
        self.node_looks = 0
        self.ready_after = ready_after
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def reply(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                if path in RESOURCES:
                    self.reply(200, {"resources": [
                        {"name": n, "kind": k, "namespaced": ns}
                        for n, k, ns in RESOURCES[path]]})
                elif path == "/api/v1/nodes/node-1":
                    stub.node_looks += 1
                    if stub.node_looks == 1:
                        self.reply(404, {"kind": "Status", "reason": "NotFound",
                                         "message": 'nodes "node-1" not found'})
                        return
                    ready = "True" if stub.node_looks > stub.ready_after else "False"
                    self.reply(200, {"kind": "Node", "status": {"conditions": [
                        {"type": "Ready", "status": ready, "reason": "KubeletNotReady",
                         "message": "container runtime network not ready"}]}})
                else:
                    self.reply(404, {"kind": "Status", "reason": "NotFound"})

            def do_PATCH(self) -> None:
                parts = urlsplit(self.path)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.applied.append({
                    "path": parts.path, "query": parse_qs(parts.query),
                    "contentType": self.headers["Content-Type"],
                    "auth": self.headers.get("Authorization"), "kind": body["kind"]})
                stub.stored[parts.path] = body
                self.reply(200, body)

        self.server = HTTPServer(  # one request at a time, as the agent asks
            ("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> WorkloadStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class NoSleep(Clock):
    """Time passes only when the agent sleeps."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def monotonic(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.now_s += seconds


class Recorder:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def publish(self, conditions: list[Condition], final: bool) -> None:
        self.messages += [c.message for c in conditions if c.type == "CNIReady"]


@pytest.fixture
def stub() -> Iterator[WorkloadStub]:
    with WorkloadStub(ready_after=3) as s:
        yield s


def setup(tmp_path: Path, server: str, manifest: bytes, digest: str | None = None,
          ready_timeout: str = "10m") -> Any:
    root = tmp_path / "root"
    (root / "etc/kubernetes").mkdir(parents=True)
    (root / "etc/kubernetes/admin.conf").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "admin@w",
        "contexts": [{"name": "admin@w", "context": {"cluster": "w", "user": "admin"}}],
        "clusters": [{"name": "w", "cluster": {"server": server}}],
        "users": [{"name": "admin", "user": {
            "token": "abcdef.0123456789abcdef",
            "client-certificate-data": base64.b64encode(b"CERT").decode(),
            "client-key-data": base64.b64encode(b"KEY").decode()}}]}))
    (root / "srv").mkdir()
    (root / "srv/cni.yaml").write_bytes(manifest)
    (root / "etc/hostname").write_text("Node-1\n")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
        "spec": {"cni": {"manifest": {"file": "/srv/cni.yaml", "apply": "always",
                                      "sha256": digest or sha256(manifest),
                                      "readyTimeout": ready_timeout}},
                 "retry": {"attempts": 1}}}))
    host = Host(root, clock=NoSleep())
    return root, host, load_config(host, [FileSource(str(config), required=True,
                                                     outside_root=True)])


def test_manifest_is_server_side_applied_and_the_node_waited_for(
        tmp_path: Path, stub: WorkloadStub) -> None:
    root, host, loaded = setup(tmp_path, stub.url, MANIFEST.encode())
    recorder = Recorder()
    result = Orchestrator(loaded, host, phases=[CNIPhase()], reporters=[recorder]).run()
    assert result.ok, result.outcomes
    assert [(a["kind"], a["path"]) for a in stub.applied] == [
        ("ServiceAccount", "/api/v1/namespaces/kube-flannel/serviceaccounts/flannel"),
        ("ClusterRole", "/apis/rbac.authorization.k8s.io/v1/clusterroles/flannel"),
        ("ConfigMap", "/api/v1/namespaces/kube-flannel/configmaps/kube-flannel-cfg"),
        ("DaemonSet", "/apis/apps/v1/namespaces/kube-flannel/daemonsets/kube-flannel-ds")]
    assert all(a["contentType"] == "application/apply-patch+yaml"
               and a["query"] == {"fieldManager": ["machine-agent"]}
               and a["auth"] == "Bearer abcdef.0123456789abcdef" for a in stub.applied)
    assert stub.node_looks == 4  # not registered, NotReady twice, Ready
    waits = [m for m in recorder.messages if m.startswith("waiting for Node node-1")]
    assert waits[0] == ("waiting for Node node-1 to be Ready (the Node is not registered yet; "
                        "0s of 600s)")
    assert "Ready=False KubeletNotReady: container runtime network not ready" in waits[1]
    assert recorder.messages[-1] == "Node node-1 is Ready"
    key = root / "run/machine-agent/workload/admin.conf/client.key"
    assert key.read_bytes() == b"KEY" and key.stat().st_mode & 0o777 == 0o600


def test_applying_again_converges_to_the_same_objects(tmp_path: Path,
                                                      stub: WorkloadStub) -> None:
    root, host, loaded = setup(tmp_path, stub.url, MANIFEST.encode())
    assert Orchestrator(loaded, host, phases=[CNIPhase()]).run().ok
    first = dict(stub.stored)
    (root / "var/lib/machine-agent/journal.json").unlink()  # as if the journal were lost
    assert Orchestrator(loaded, host, phases=[CNIPhase()]).run().ok
    assert len(stub.applied) == 8 and stub.stored == first


def test_node_not_ready_in_time_is_a_temporary_failure_that_says_why(tmp_path: Path) -> None:
    with WorkloadStub(ready_after=10**6) as never:
        _root, host, loaded = setup(tmp_path, never.url, MANIFEST.encode(),
                                   ready_timeout="20s")
        result = Orchestrator(loaded, host, phases=[CNIPhase()]).run()
    outcome = result.outcomes[0]
    assert (outcome.reason, outcome.temporary) == ("CNIBroken", True)
    assert never.node_looks == 5  # at 0, 5, 10, 15 and 20 seconds
    assert "Node node-1 is not Ready 20s after the CNI manifest was applied: " \
           "Ready=False KubeletNotReady" in outcome.message


def test_manifest_checksum_mismatch_applies_nothing(tmp_path: Path,
                                                    stub: WorkloadStub) -> None:
    root, host, loaded = setup(tmp_path, stub.url, MANIFEST.encode(), digest="a" * 64)
    before = snapshot(root)
    result = Orchestrator(loaded, host, phases=[CNIPhase()]).run()
    assert result.outcomes[0].reason == "CNIBroken"
    assert f"expected {'a' * 64}; nothing was applied" in result.outcomes[0].message
    assert stub.applied == []
    assert {k: v for k, v in snapshot(root).items() if not k.startswith("var")} == before


def test_a_manifest_document_that_is_not_an_object_is_refused(tmp_path: Path,
                                                              stub: WorkloadStub) -> None:
    _root, host, loaded = setup(tmp_path, stub.url, b"apiVersion: v1\nkind: ConfigMap\n")
    result = Orchestrator(loaded, host, phases=[CNIPhase()]).run()
    assert "document 1 is not a Kubernetes object" in result.outcomes[0].message
    assert stub.applied == []
