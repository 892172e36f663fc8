"""When the agent's pre-terminate hook holds its Machine: from the start of the bootstrap
(a Machine deleted during its bootstrap is held, and its delete policy runs once the
bootstrap ends) for as long as the agent runs; a stopped agent holds nothing (so a
Machine whose agent is gone is never held for ever), unless its deletion is under way
(the delete policy owns the hook: the next start runs it)."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
from machine_agent_sandbox.testkit.management import World

from agent.daemon.deletion import HOOK
from tests.integration.daemon.capi import PRE_TERMINATE, MachineController
from tests.integration.daemon.service import Systemd, start, stop
from tests.integration.daemon.test_daemon_lifecycle import (
    KUBELET_CONF,
    Daemon,
    daemon,
    hooks,
    machine_path,
    wait_until,
)
from tests.integration.kube.conftest import Admin, Node

pytestmark = pytest.mark.allow_processes
__all__ = ["daemon"]  # the fixture, shared


def test_a_machine_deleted_during_its_bootstrap_is_held_and_cleaned_up(
        admin: Admin, node: Node, world: World, systemd: Systemd) -> None:
    assert world.world_path is not None
    state = json.loads(world.world_path.read_text())
    state["failNext"] = ["hang:4"]  # kubeadm join takes 4 s
    world.world_path.write_text(json.dumps(state))
    log = node.root.parent / "bootstrap-daemon.log"
    proc: subprocess.Popen[str] | None = None
    try:
        with MachineController(admin) as capi:
            proc = start(["-m", "agent.cli", "--root", str(node.root), "daemon"], systemd,
                         log=log)
            wait_until(lambda: hooks(admin).get(HOOK), "the agent's hook")
            assert not (node.root / KUBELET_CONF).exists()  # the bootstrap still runs
            admin.call("DELETE", machine_path(admin), ok=(200, 202))
            wait_until(capi.gone, "CAPI to delete the Machine once the node is cleaned up",
                       timeout=60)
        assert capi.hooks == ["machine-agent"]  # CAPI waited for the agent
        conditions = {c["type"]: c for c in capi.final["status"]["conditions"]}
        assert (conditions["KubeadmReset"]["status"],
                conditions["NodeCleanedUp"]["status"]) == ("True", "True")
        assert not (node.root / KUBELET_CONF).exists()  # joined, then reset
    finally:
        if proc is not None:
            code, _ = stop(proc)
            assert code == 0, log.read_text()


def test_a_stopped_agent_holds_nothing_and_its_next_start_holds_again(
        daemon: Daemon, admin: Admin, node: Node) -> None:
    daemon.start()
    assert hooks(admin).get(HOOK) == "machine-agent"
    daemon.stop()
    assert HOOK not in hooks(admin)
    assert "the pre-terminate hook" in daemon.output() and "is off" in daemon.output()
    daemon.start()
    assert hooks(admin).get(HOOK) == "machine-agent"
    daemon.stop()


KCP_HOOK = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/kcp-cleanup"


class KubeadmControlPlane:
    """KCP's pre-terminate handling as reconcilePreTerminateHook does it for its own
    spec.version 1.31 or later (cluster-api controlplane/kubeadm): once CAPI waits on the
    hooks, it waits until every other pre-terminate hook is gone, then (its etcd member
    removed) takes its kcp-cleanup hook off."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> KubeadmControlPlane:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=10)

    def _run(self) -> None:
        while not self.stopped.wait(0.1):
            machine = self.admin.call("GET", machine_path(self.admin), ok=(200, 404))
            meta = machine.get("metadata") or {}
            annotations = meta.get("annotations") or {}
            waiting = any(c.get("reason") == "WaitingForPreTerminateHook"
                          for c in (machine.get("status") or {}).get("conditions") or [])
            others = [k for k in annotations
                      if k.startswith(PRE_TERMINATE + "/") and k != KCP_HOOK]
            if meta.get("deletionTimestamp") and waiting and KCP_HOOK in annotations \
                    and not others:
                self.admin.call("PATCH", machine_path(self.admin),
                                {"metadata": {"annotations": {KCP_HOOK: None}}},
                                content_type="application/merge-patch+json")
                return


def test_an_outdated_control_plane_deleted_by_a_kcp_rollout_is_not_held_for_ever(
        daemon: Daemon, admin: Admin, node: Node) -> None:
    """A v1.30 control-plane Machine deleted by KCP rolling out v1.31: KCP waits for the
    agent's hook, so the agent must not wait for KCP's; the node is left to KCP."""
    with MachineController(admin) as capi, KubeadmControlPlane(admin):
        daemon.start()
        admin.call("PATCH", machine_path(admin), {
            "metadata": {"labels": {"cluster.x-k8s.io/control-plane": ""},
                         "annotations": {KCP_HOOK: ""}},
            "spec": {"version": "v1.30.6"}}, content_type="application/merge-patch+json")
        assert hooks(admin).get(HOOK) == "machine-agent"
        admin.call("DELETE", machine_path(admin), ok=(200, 202))
        wait_until(capi.gone, "CAPI to delete the Machine")
    assert sorted(capi.hooks) == ["kcp-cleanup", "machine-agent"]
    conditions = {c["type"]: c for c in capi.final["status"]["conditions"]}
    reset = conditions["KubeadmReset"]
    assert (reset["status"], reset["reason"]) == ("True", "Skipped")
    assert KCP_HOOK in reset["message"]
    assert (node.root / KUBELET_CONF).exists()  # KCP's and the infrastructure's now
    daemon.stop()
