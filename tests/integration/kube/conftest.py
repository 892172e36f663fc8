"""The management cluster fixtures for the agent's integration tests (the world they
build is machine_agent_sandbox.testkit.management, which the benchmarks share): the
stand-in or a real API server when MACHINE_AGENT_TEST_KUBECONFIG names an admin
kubeconfig. Every test gets its own namespace."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from machine_agent_sandbox.apiserver import ApiServer
from machine_agent_sandbox.testkit.faultproxy import FaultProxy
from machine_agent_sandbox.testkit.management import (
    CAPI_MANAGER,
    CLUSTER,
    CONFIGMAP,
    HOST_UUID,
    MACHINE,
    NODE_CONFIG,
    PHASE_CONDITIONS,
    REAL_KUBECONFIG,
    SECRET,
    Admin,
    FastClock,
    Node,
    World,
    bootstrap_secret,
    make_node,
    node_token,
    real_admin,
    seed,
)
from machine_agent_sandbox.testkit.node import joinable

__all__ = ["CAPI_MANAGER", "CLUSTER", "CONFIGMAP", "HOST_UUID", "MACHINE", "NODE_CONFIG",
           "PHASE_CONDITIONS", "REAL_KUBECONFIG", "SECRET", "Admin", "FastClock", "Node",
           "World", "admin", "bootstrap_secret", "make_node", "node", "node_token", "seed",
           "world"]


@pytest.fixture
def admin(standin: ApiServer | None, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[Admin]:
    if standin is None:
        monkeypatch.setenv("PYTEST_TMPDIR", str(tmp_path))
        api = real_admin()
    else:
        api = Admin(standin.url, str(standin.ca_path),
                    {"Authorization": f"Bearer {standin.admin_token}"})
    api.ns = "t-" + secrets.token_hex(4)
    api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                      "metadata": {"name": api.ns}})
    yield api
    api.call("DELETE", f"/api/v1/namespaces/{api.ns}", ok=(200, 202, 404))


@pytest.fixture
def world(tmp_path_factory: pytest.TempPathFactory,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """A joinable node root (short: socket paths) with the kubeadm stand-in on PATH."""
    root = tmp_path_factory.mktemp("n")
    with joinable(root, tmp_path_factory.mktemp("t")) as join:
        monkeypatch.setenv("PATH", f"{join.path}:{os.environ['PATH']}")
        yield World(root, join.endpoint, join.world_path)


@pytest.fixture
def node(world: World, admin: Admin) -> Node:
    """A node whose Machine is named in its config, with everything seeded."""
    seed(admin, world)
    return make_node(world, admin, node_token(admin))


@pytest.fixture
def proxy(admin: Admin, tmp_path: Path) -> Iterator[FaultProxy]:
    """The fault-injecting proxy in front of whichever server the tests use."""
    with FaultProxy(admin.server, admin.verify, tmp_path / "proxy", admin.cert) as running:
        yield running


@pytest.fixture
def faulty_node(world: World, admin: Admin,
                proxy: FaultProxy) -> Node:
    """`node`, reaching the management cluster only through the fault proxy."""
    seed(admin, world)
    return make_node(world, admin, node_token(admin), via=proxy)

