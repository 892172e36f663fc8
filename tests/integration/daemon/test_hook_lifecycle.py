"""When the agent's pre-terminate hook holds its Machine: from the start of the bootstrap
(a Machine deleted during its bootstrap is held, and its delete policy runs once the
bootstrap ends) for as long as the agent runs; a stopped agent holds nothing (so a
Machine whose agent is gone is never held for ever), unless its deletion is under way
(the delete policy owns the hook: the next start runs it)."""

from __future__ import annotations

import json
import subprocess

import pytest
from machine_agent_sandbox.testkit.management import World

from agent.daemon.deletion import HOOK
from tests.integration.daemon.capi import MachineController
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
