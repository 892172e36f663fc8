"""Fixtures for the management API tests: the in-process stand-in, or a real API server
when MACHINE_AGENT_TEST_KUBECONFIG names a kubeconfig (admin rights, CAPI and in-cluster
IPAM CRDs installed). Every test gets its own namespace.

A test of the stand-in's own hooks (faults, counters, compaction, its pool controller,
its token hook) asks for `own_standin`: it tests the sandbox, not the management
cluster, so it always runs against a stand-in, the one it starts itself when the suite
is pointed at a real server, and its `admin` is that stand-in's. Nothing here skips."""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from machine_agent_sandbox.apiserver import ApiServer

from sandbox.tests.integration.apiserver.kubeclient import Kube

REAL_KUBECONFIG = os.environ.get("MACHINE_AGENT_TEST_KUBECONFIG", "")


def _real_admin(tmp_path: Path) -> Kube:
    config = yaml.safe_load(Path(REAL_KUBECONFIG).read_text())
    ctx_name = config.get("current-context")
    ctx = next(c["context"] for c in config["contexts"] if c["name"] == ctx_name)
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == ctx["user"])
    verify: str | bool = True
    if cluster.get("certificate-authority-data"):
        ca = tmp_path / "real-ca.crt"
        ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        verify = str(ca)
    elif cluster.get("certificate-authority"):
        verify = cluster["certificate-authority"]
    cert: tuple[str, str] | None = None
    if user.get("client-certificate-data"):
        crt, key = tmp_path / "real-client.crt", tmp_path / "real-client.key"
        crt.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        cert = (str(crt), str(key))
    return Kube(cluster["server"], verify, token=user.get("token"), cert=cert)


@pytest.fixture
def own_standin(standin: ApiServer | None, tmp_path: Path) -> Iterator[ApiServer]:
    """The stand-in under test: the suite's, or one of the test's own against a real
    server (started as the suite's is)."""
    if standin is not None:
        yield standin
        return
    with ApiServer(tmp_path / "own-apiserver", bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
def admin(request: pytest.FixtureRequest, standin: ApiServer | None, tmp_path: Path) -> Kube:
    """The administrator of the server the test runs against (own_standin's, if it asks
    for one)."""
    if "own_standin" in request.fixturenames:
        standin = request.getfixturevalue("own_standin")
    if standin is None:
        return _real_admin(tmp_path)
    return Kube(standin.url, str(standin.ca_path), token=standin.admin_token)


@pytest.fixture
def ns(admin: Kube) -> Iterator[str]:
    name = "t-" + secrets.token_hex(4)
    admin.check(admin.post("/api/v1/namespaces", json={
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}), 201)
    admin.ns = name
    yield name
    admin.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture
def service_account(admin: Kube, ns: str) -> tuple[str, Kube]:
    """A ServiceAccount `agent` in the test namespace and a client with its token
    (from the TokenRequest API, so this works against a real server too)."""
    admin.check(admin.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json={
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "agent"}}), 201)
    reply = admin.check(admin.post(
        f"/api/v1/namespaces/{ns}/serviceaccounts/agent/token",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"expirationSeconds": 3600}}), 201)
    user = f"system:serviceaccount:{ns}:agent"
    return user, admin.with_token(reply["status"]["token"])

