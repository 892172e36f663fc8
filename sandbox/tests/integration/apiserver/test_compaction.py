"""Compaction on its own, as kube-apiserver has etcd compacted every few minutes: a
client that watches or lists from a resourceVersion older than the last compaction gets
what a real server past its compactions answers (corpus case m), without a test asking
for it; and the stand-in run as a process can be set up as the recorded server was."""

from __future__ import annotations

import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from machine_agent_sandbox.apiserver import ApiServer
from machine_agent_sandbox.apiserver.compaction import Compactor

from sandbox.tests.integration.apiserver.kubeclient import Kube, machine, wait_until

MACHINES = "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines"


def test_history_is_compacted_in_the_background_and_old_reads_expire(tmp_path: Path) -> None:
    with ApiServer(tmp_path / "api", compaction_interval=0.2, ipam=False) as api:
        admin = Kube(api.url, str(api.ca_path), token=api.admin_token)
        rv = admin.check(admin.post(MACHINES, json=machine("a")), 201)[
            "metadata"]["resourceVersion"]
        admin.check(admin.post(MACHINES, json=machine("b")), 201)
        wait_until(lambda: api.store.floor > int(rv) or None, timeout=10)
        expired = admin.check(admin.get(MACHINES, params={
            "resourceVersion": rv, "resourceVersionMatch": "Exact"}), 410)
        assert expired["reason"] == "Expired"
        events = list(admin.watch(MACHINES, {"resourceVersion": rv, "timeoutSeconds": "2"}))
        assert [(e["type"], e["object"]["code"]) for e in events] == [("ERROR", 410)]


def test_a_round_compacts_only_what_the_round_before_it_saw(tmp_path: Path) -> None:
    """A watcher a moment behind still gets its events after one round; after the next,
    its resourceVersion has expired, as on a real server."""
    with ApiServer(tmp_path / "api", compaction_interval=None, ipam=False) as api:
        admin = Kube(api.url, str(api.ca_path), token=api.admin_token)
        compactor = Compactor(api.store, interval=60)
        rv = admin.check(admin.post(MACHINES, json=machine("a")), 201)[
            "metadata"]["resourceVersion"]
        admin.check(admin.post(MACHINES, json=machine("b")), 201)
        assert compactor.round() < int(rv)
        events = list(admin.watch(MACHINES, {"resourceVersion": rv, "timeoutSeconds": "1"}))
        assert [e["object"]["metadata"]["name"] for e in events] == ["b"]
        assert compactor.round() > int(rv)
        events = list(admin.watch(MACHINES, {"resourceVersion": rv, "timeoutSeconds": "1"}))
        assert [(e["type"], e["object"]["code"]) for e in events] == [("ERROR", 410)]


def test_the_sandbox_token_hook_issues_tokens_with_a_uid(tmp_path: Path) -> None:
    with ApiServer(tmp_path / "api", ipam=False) as api:
        admin = Kube(api.url, str(api.ca_path), token=api.admin_token)
        token = admin.check(admin.post("/sandbox/v1/tokens", json={
            "user": "agent", "uid": "agent-uid", "groups": []}), 201)["token"]
        review = admin.with_token(token).check(admin.with_token(token).post(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews", json={
                "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}), 201)
        assert review["status"]["userInfo"] == {
            "username": "agent", "uid": "agent-uid", "groups": ["system:authenticated"]}


@pytest.mark.allow_processes
def test_the_process_runs_without_controllers_as_the_corpus_server(tmp_path: Path) -> None:
    """--no-controllers: no garbage collector, so a Foreground deletion keeps its
    finalizer, as on the recording server (corpus finding 2)."""
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "machine_agent_sandbox.apiserver", "--state-dir", str(state),
         "--no-controllers", "--compaction-interval", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "the stand-in did not print its URL within 30 s"
        url = proc.stdout.readline().strip()
        token = yaml.safe_load((state / "admin.kubeconfig").read_text())[
            "users"][0]["user"]["token"]
        admin = Kube(url, str(state / "ca.crt"), token=token)
        admin.check(admin.post(MACHINES, json=machine("fg")), 201)
        admin.check(admin.delete(f"{MACHINES}/fg", params={
            "propagationPolicy": "Foreground"}), 200)
        time.sleep(1.0)  # a garbage collector would have removed it by now
        stuck = admin.check(admin.get(f"{MACHINES}/fg"), 200)
        assert stuck["metadata"]["finalizers"] == ["foregroundDeletion"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
