"""Faults of the management cluster, injected by the fault proxy in front of whichever
server the tests use (testkit/faultproxy.py; the stand-in in CI, a real cluster with
MACHINE_AGENT_TEST_KUBECONFIG): each run must end with the correct final status on the
Machine and no report lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from machine_agent_sandbox.testkit.faultproxy import FaultProxy

from agent.errors import Reason
from agent.host import Host
from agent.kube.machine import BootstrapDataMissing
from agent.kube.reporter import Reports
from agent.orchestrator import RunResult
from agent.phases import registry
from agent.phases.base import Phase, PhaseContext, PhasePlan
from agent.session import open_session
from agent.state import Journal
from tests.integration.kube.conftest import (
    SECRET,
    Admin,
    FastClock,
    Node,
    World,
    bootstrap_secret,
    make_node,
    node_token,
    seed,
)
from tests.integration.kube.test_machine_reporting import assert_bootstrapped

ALL_EVENTS = sorted(["NetworkConfigured", "TimeSynchronized", "Joined", "CNIInstalled",
                     "Bootstrapped"])


def hooked(hooks: dict[str, Callable[[], None]]) -> list[Phase]:
    """The real phases; `hooks[name]` runs as that phase starts applying."""
    phases = []
    for phase in registry.load():
        if phase.name in hooks:
            hook = hooks[phase.name]

            class Hooked(type(phase)):  # type: ignore[misc]
                def apply(self, ctx: PhaseContext, plan: PhasePlan,
                          hook: Callable[[], None] = hook) -> None:
                    hook()
                    super().apply(ctx, plan)

            phase = Hooked()
        phases.append(phase)
    return phases


def run(node: Node, clock: FastClock, hooks: dict[str, Callable[[], None]] | None = None
        ) -> RunResult:
    host = Host(node.root, clock=clock)
    session = open_session(host)
    return session.orchestrator(host, phases=hooked(hooks or {})).run()


def undelivered(node: Node) -> dict[str, object]:
    state = Journal.load(Host(node.root)).stored[Reports.KEY]
    return {"dirty": state["dirty"], "events": len(state["events"])}


def test_api_down_at_start_is_waited_out(faulty_node: Node, admin: Admin,
                                         proxy: FaultProxy) -> None:
    proxy.faults.add("drop", count=8)  # more than one request's retries
    assert run(faulty_node, FastClock()).ok
    assert_bootstrapped(admin)
    assert sorted(e["reason"] for e in admin.events()) == ALL_EVENTS


def test_api_down_mid_run_keeps_reports_in_the_journal_and_flushes_them(
        faulty_node: Node, admin: Admin, proxy: FaultProxy) -> None:
    seen: dict[str, object] = {}

    def down() -> None:
        proxy.faults.add("drop")

    def up() -> None:
        seen.update(undelivered(faulty_node))
        proxy.faults.clear()

    assert run(faulty_node, FastClock(), {"time": down, "cni": up}).ok
    assert seen["events"] == 3  # network, time, join completed while the API was down
    assert_bootstrapped(admin)
    assert sorted(e["reason"] for e in admin.events()) == ALL_EVENTS
    assert undelivered(faulty_node) == {"dirty": False, "events": 0}


def test_api_down_during_the_final_report_is_retried(faulty_node: Node, admin: Admin,
        proxy: FaultProxy) -> None:
    def flaky_status() -> None:
        proxy.faults.add("500", path=r"/machines/[^/]+/status$", count=4)
        proxy.faults.add("drop", path=r"/events$", count=3)

    assert run(faulty_node, FastClock(), {"cni": flaky_status}).ok
    assert_bootstrapped(admin)
    assert sorted(e["reason"] for e in admin.events()) == ALL_EVENTS


def test_reports_survive_an_agent_restart(faulty_node: Node, admin: Admin,
        proxy: FaultProxy) -> None:
    def down() -> None:
        proxy.faults.add("drop")

    assert run(faulty_node, FastClock(), {"network": down}).ok  # the node is fine; no report
    assert undelivered(faulty_node) == {"dirty": True, "events": 5}
    proxy.faults.clear()
    assert admin.conditions()["NodeBootstrapped"]["status"] == "Unknown"  # the last sent
    assert run(faulty_node, FastClock()).ok  # the next start (systemd restarts the unit)
    assert_bootstrapped(admin)
    assert sorted(e["reason"] for e in admin.events()) == ALL_EVENTS


def test_a_429_storm_is_ridden_out_honouring_retry_after(faulty_node: Node, admin: Admin,
        proxy: FaultProxy) -> None:
    clock = FastClock()
    proxy.faults.add("429", count=10, retry_after=3)
    assert run(faulty_node, clock).ok
    assert sum(1 for s in clock.slept if s >= 3) >= 5
    assert_bootstrapped(admin)
    assert sorted(e["reason"] for e in admin.events()) == ALL_EVENTS


def _secret_appears_later(admin: Admin, world: World, delay: float) -> threading.Timer:
    timer = threading.Timer(delay, lambda: admin.create(
        f"/api/v1/namespaces/{admin.ns}/secrets", bootstrap_secret(admin.ns, world.endpoint)))
    timer.start()
    return timer


def test_the_bootstrap_secret_is_awaited_through_closed_watches(
        world: World, admin: Admin, proxy: FaultProxy) -> None:
    seed(admin, world, secret_name=None)
    admin.apply(f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{admin.ns}/machines/worker-0",
                {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                 "metadata": {"name": "worker-0", "namespace": admin.ns},
                 "spec": {"bootstrap": {"dataSecretName": SECRET}}}, "capi-bootstrap")
    node = make_node(world, admin, node_token(admin), via=proxy)
    proxy.faults.add("close_watch", path=r"/secrets$", count=3, after_events=0)
    timer = _secret_appears_later(admin, world, 1.0)
    try:
        assert run(node, FastClock()).ok
    finally:
        timer.join()
    assert proxy.counters()[("watch", "secrets")] >= 3
    assert_bootstrapped(admin)


def test_a_bootstrap_secret_that_never_appears_ends_the_wait_at_bootstrap_wait_naming_it(
        world: World, admin: Admin, proxy: FaultProxy) -> None:
    """The Machine names its bootstrap data Secret, which is never written: the agent
    watches for it for spec.management.bootstrapWait (2s here), once, not once per retry
    of reading the Machine (spec.retry allows 4), then says which Secret is missing."""
    seed(admin, world, secret_name=None)
    admin.apply(f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{admin.ns}/machines/worker-0",
                {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                 "metadata": {"name": "worker-0", "namespace": admin.ns},
                 "spec": {"bootstrap": {"dataSecretName": SECRET}}}, "capi-bootstrap")
    node = make_node(world, admin, node_token(admin), via=proxy)
    node.write("/etc/machine-agent/config.d/50-wait.yaml",
               "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"
               "spec:\n  management:\n    bootstrapWait: 2s\n")
    started = time.monotonic()
    with pytest.raises(BootstrapDataMissing) as caught:
        open_session(Host(node.root))
    took = time.monotonic() - started
    err = caught.value
    assert err.reason is Reason.BootstrapDataMissing and err.temporary
    assert str(err).startswith(
        f"the bootstrap data Secret {admin.ns}/{SECRET} (named by the Machine's "
        "spec.bootstrap.dataSecretName) did not appear within "
        "spec.management.bootstrapWait (2s)"), str(err)
    assert "KubeadmConfig" in (err.hint or "")
    # Bounded by the wait (a watch's time-out is whole seconds), not 4 times it.
    assert 2.0 <= took < 4.0, took
    assert proxy.counters()[("watch", "secrets")] >= 1  # watched, not polled


def test_410_gone_on_the_list_lists_again(world: World, admin: Admin,
                                          proxy: FaultProxy) -> None:
    seed(admin, world, secret_name=None)
    admin.apply(f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{admin.ns}/machines/worker-0",
                {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                 "metadata": {"name": "worker-0", "namespace": admin.ns},
                 "spec": {"bootstrap": {"dataSecretName": SECRET}}}, "capi-bootstrap")
    node = make_node(world, admin, node_token(admin), via=proxy)
    proxy.faults.add("410", path=r"/secrets$", count=1)
    timer = _secret_appears_later(admin, world, 0.5)
    try:
        assert run(node, FastClock()).ok
    finally:
        timer.join()
    assert proxy.counters()[("list", "secrets")] == 2
    assert_bootstrapped(admin)
