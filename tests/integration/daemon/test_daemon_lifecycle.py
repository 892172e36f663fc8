"""`machine-agent daemon` living with its Machine on a management cluster (the stand-in, or
a real API server): it idles with its watches open and no wake-ups, stops at once on
SIGTERM while blocked in a read, runs the delete policy when its Machine is deleted once
CAPI (played by tests/integration/daemon/capi.py) has drained it and waits on the agent's
pre-terminate hook, tries a failed step again or holds the Machine for a person, loses
no report through an outage and a restart, and applies a changed AgentConfig
(network/time) without joining again; on a node that has not bootstrapped (a mistake in
the ConfigMap, a join refused by preflight), the fixed ConfigMap runs the whole bootstrap
again, without a restart."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from machine_agent_sandbox.sandbox import install_cni_plugins
from machine_agent_sandbox.testkit.faultproxy import FaultProxy

from agent.daemon.deletion import HOOK, DeleteRecord
from agent.host import Host
from agent.kube.machine_config import content_digest
from agent.report import read_status
from agent.state import Journal
from tests.chronyd import chronyd, free_udp_ports, ntp_server, private_dir
from tests.integration.daemon.capi import PRE_TERMINATE, MachineController
from tests.integration.daemon.service import Systemd, start, stop, wakeups
from tests.integration.kube.conftest import CONFIGMAP, MACHINE, Admin, Node

pytestmark = pytest.mark.allow_processes
HOLD = "test.machine-agent.io/hold"
"""The test's own finalizer: it keeps the Machine while the agent cleans up, as CAPI's
do while it drains."""
KUBELET_CONF = "etc/kubernetes/kubelet.conf"


def wait_until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"gave up after {timeout}s waiting for {what}"
        time.sleep(0.1)


def machine_path(admin: Admin) -> str:
    return f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{admin.ns}/machines/{MACHINE}"


def set_config(admin: Admin, text: str) -> None:
    admin.call("PATCH", f"/api/v1/namespaces/{admin.ns}/configmaps/{CONFIGMAP}",
               {"data": {"config.yaml": text}},
               content_type="application/merge-patch+json")


def agent_config(spec: str) -> str:
    return f"apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\nspec:\n{spec}"


def condition(admin: Admin, kind: str) -> dict[str, Any] | None:
    return admin.conditions().get(kind)


def hooks(admin: Admin) -> dict[str, str]:
    return dict(admin.machine()["metadata"].get("annotations") or {})


def is_true(admin: Admin, kind: str) -> bool:
    found = condition(admin, kind)
    return found is not None and found["status"] == "True"


def is_false(admin: Admin, kind: str) -> dict[str, Any] | None:
    found = condition(admin, kind)
    return found if found is not None and found["status"] == "False" else None


def pending_reports(root: Path) -> bool:
    state = Journal.load(Host(root)).stored.get("reports") or {}
    return bool(state.get("dirty") or state.get("events"))


class Daemon:
    """The daemon under test, run as systemd runs it; its output goes to a file."""

    def __init__(self, node: Node, systemd: Systemd) -> None:
        self.node, self.systemd = node, systemd
        self.log = node.root.parent / f"{node.root.name}-daemon.log"
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> Daemon:
        self.systemd.messages.clear()
        self.proc = start(["-m", "agent.cli", "--root", str(self.node.root), "daemon"],
                          self.systemd, log=self.log)
        try:
            self.systemd.wait_for("READY=1", timeout=60)
        except AssertionError:
            raise AssertionError(self.output()) from None
        return self

    def stop(self) -> float:
        """SIGTERM; how long it took to exit (0 asserted as its status)."""
        assert self.proc is not None
        started = time.monotonic()
        code, _ = stop(self.proc)
        took = time.monotonic() - started
        self.proc = None
        assert code == 0, self.output()
        return took

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


@pytest.fixture
def daemon(node: Node, systemd: Systemd) -> Iterator[Daemon]:
    the_daemon = Daemon(node, systemd)
    try:
        yield the_daemon
    finally:
        if the_daemon.proc is not None and the_daemon.proc.poll() is None:
            the_daemon.proc.kill()
            the_daemon.proc.wait(timeout=10)
        print(the_daemon.output()[-5000:])


def test_idle_with_its_watches_open_it_never_wakes_and_sigterm_ends_the_blocked_read(
        daemon: Daemon, admin: Admin, proxy: FaultProxy) -> None:
    daemon.start()
    wait_until(lambda: is_true(admin, "NodeBootstrapped"), "the bootstrap on the Machine")
    # the watches are open (list + watch of both objects), as the proxy the daemon
    # reaches the server through counts them
    wait_until(lambda: all(proxy.counters().get(("watch", kind)) for kind in (
        "machines", "configmaps")), "the watches to open")
    assert daemon.proc is not None
    time.sleep(1.0)  # the echo of its own reports (its Machine's status) settles
    before = wakeups(daemon.proc.pid)
    time.sleep(3.0)
    assert wakeups(daemon.proc.pid) == before, "the idle daemon woke up"

    took = daemon.stop()
    assert took < 5, f"SIGTERM took {took:.1f}s"
    assert "stopping on SIGTERM" in daemon.output()
    assert "STOPPING=1" in daemon.systemd.wait_for("STOPPING=1")
    journal = Journal.load(Host(daemon.node.root))
    assert {n: r.state for n, r in journal.phases.items()} == {
        "network": "completed", "time": "completed", "join": "completed", "cni": "completed"}
    assert not pending_reports(daemon.node.root)


def test_deleting_the_machine_resets_the_node_after_the_drain_and_reports_each_step(
        daemon: Daemon, admin: Admin, node: Node) -> None:
    install_cni_plugins(node.root / "opt/cni/bin")  # Debian's, where binDir expects them
    node.write("/etc/machine-agent/config.d/50-cni.yaml", agent_config(
        "  cni:\n    conflist: {template: bridge, values: {subnet: 198.51.100.0/24}}\n"
        "    check: {enabled: false}\n"))
    conflist = node.root / "etc/cni/net.d/10-machine-agent.conflist"
    during_drain: list[bool] = []

    def drain() -> None:  # the kubelet must keep running while pods are evicted
        time.sleep(1.5)
        during_drain.append((node.root / KUBELET_CONF).exists() and conflist.exists())

    with MachineController(admin, drain) as capi:
        daemon.start()
        wait_until(lambda: is_true(admin, "NodeBootstrapped"), "the bootstrap")
        assert conflist.exists() and (node.root / KUBELET_CONF).exists()
        assert wait_until(lambda: hooks(admin).get(HOOK), "the agent's hook") == \
            "machine-agent"

        deleted = admin.call("DELETE", machine_path(admin), ok=(200, 202))
        assert deleted["metadata"]["deletionTimestamp"]  # held by CAPI's finalizer
        wait_until(capi.gone, "CAPI to delete the Machine")
    assert during_drain == [True], "the node was reset during the drain"
    assert capi.hooks == ["machine-agent"]
    assert capi.reasons == ["DrainingNode", "WaitingForPreTerminateHook",
                            "WaitingForInfrastructureDeletion", "DeletionCompleted",
                            "Deleted"]
    assert set(capi.final["status"]["deletion"]) == {"nodeDrainStartTime",
                                                     "waitForPreTerminateHookStartTime"}
    # What the Machine said when its hook came off: every step, while it still existed.
    conditions = {c["type"]: c for c in capi.final["status"]["conditions"]}
    assert {k: (conditions[k]["status"], conditions[k]["reason"]) for k in (
        "KubeadmReset", "AddressesReleased", "CNIConfigRemoved", "NodeCleanedUp")} == {
        "KubeadmReset": ("True", "NodeReset"),
        "AddressesReleased": ("True", "AddressesReleased"),
        "CNIConfigRemoved": ("True", "CNIConfigRemoved"),
        "NodeCleanedUp": ("True", "CleanedUp")}
    assert conditions["KubeadmReset"]["message"] == "kubeadm reset -f undid the join"
    assert conditions["CNIConfigRemoved"]["message"] == \
        "removed /etc/cni/net.d/10-machine-agent.conflist"
    assert not (node.root / KUBELET_CONF).exists() and not conflist.exists()
    wait_until(lambda: {"NodeReset", "AddressesReleased", "CNIConfigRemoved",
                        "CleanedUp"} <= {e["reason"] for e in admin.events()},
               "an Event for each step")
    admin.call("GET", machine_path(admin), ok=(404,))
    wait_until(lambda: f"Machine {admin.ns}/{MACHINE} is gone" in daemon.output(),
               "the daemon to see its Machine gone")
    daemon.stop()
    journal = Journal.load(Host(node.root))
    assert journal.section(DeleteRecord).finished
    assert "join" not in journal.phases and "cni" not in journal.phases



REAL_CAPI = Path(__file__).parents[2] / "fixtures" / "real-capi" / "worker-lifecycle.json"
INSTANT = ("DrainingNode", "WaitingForVolumeDetach")
"""Deletion steps the real controller passed within one reconcile in the recording (no
Pods to drain, no volumes), so its status never showed them; the stand-in always shows
its drain, so they are left out of both sides."""


def deletion_steps(trail: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """Each `Deleting` reason as first written, with whether a pre-terminate hook was on
    the Machine then."""
    steps: list[tuple[str, bool]] = []
    for reason, hooked in trail:
        if reason not in INSTANT and reason not in [r for r, _ in steps]:
            steps.append((reason, hooked))
    return steps


def real_deletion() -> tuple[list[tuple[str, bool]], list[str]]:
    """What the real Machine controller did (Cluster API v1.14.0, recorded): its
    deletion steps, and the Machine's phase while the agent's hook held it."""
    sequence = json.loads(REAL_CAPI.read_text())["sequence"]["demo-worker-0"]
    trail, held_phases = [], []
    for state in sequence:
        deleting = [c for c in state["conditions"]
                    if c["type"] == "Deleting" and c["status"] == "True"]
        hooked = any(k.startswith(PRE_TERMINATE + "/") for k in state["annotations"])
        if deleting:
            trail.append((deleting[0]["reason"], hooked))
            if hooked:
                held_phases.append(state["phase"])
    assert sequence[-1]["event"] == "DELETED"
    return deletion_steps(trail), held_phases


def test_the_machine_controller_stand_in_deletes_as_the_real_one_did(
        daemon: Daemon, admin: Admin) -> None:
    """The differential: the deletion of a bootstrapped node, driven by the stand-in of
    CAPI's Machine controller, goes through the steps the real controller went through
    with the same agent, and the agent's hook comes off where it did there."""
    real_steps, real_phases = real_deletion()
    assert real_steps == [("WaitingForPreTerminateHook", True),
                          ("WaitingForInfrastructureDeletion", False),
                          ("DeletionCompleted", False)]  # what the recording says
    with MachineController(admin) as capi:
        daemon.start()
        wait_until(lambda: is_true(admin, "NodeBootstrapped"), "the bootstrap")
        wait_until(lambda: hooks(admin).get(HOOK), "the agent's hook")
        admin.call("DELETE", machine_path(admin), ok=(200, 202))
        held = wait_until(lambda: (m := admin.call("GET", machine_path(admin), ok=(200, 404)))
                          .get("status", {}).get("phase") == "Deleting" and m, "phase Deleting")
        wait_until(capi.gone, "CAPI to delete the Machine")
    assert deletion_steps(capi.trail) == real_steps
    # The phase while the hook held the Machine, once the controller had seen the deletion.
    assert held["status"]["phase"] == real_phases[-1] == "Deleting"
    assert admin.call("GET", machine_path(admin), ok=(404,))["reason"] == "NotFound"
    daemon.stop()


def failing_kubeadm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> Path:
    """A kubeadm before the stand-in on PATH whose `reset` fails (`how`: `hang`, past
    onDelete.resetTimeout; `fail`: exits 1) while the returned file exists, then runs the
    stand-in's."""
    real = shutil.which("kubeadm")
    assert real is not None
    wrapper = tmp_path / "bin/kubeadm"
    wrapper.parent.mkdir()
    flag = tmp_path / "failing"
    flag.touch()
    act = "exec sleep 30" if how == "hang" else "echo 'reset: it broke' >&2; exit 1"
    wrapper.write_text(f"#!/bin/sh\nif [ \"$1\" = reset ] && [ -e {flag} ]; then\n"
                       f"  {'rm ' + str(flag) + '; ' if how == 'hang' else ''}{act}\n"
                       f"fi\nexec {real} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    return flag


def test_a_reset_that_times_out_is_tried_again_and_the_hook_holds_the_machine_meanwhile(
        daemon: Daemon, admin: Admin, node: Node, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    failing_kubeadm(tmp_path, monkeypatch, "hang")  # once
    node.write("/etc/machine-agent/config.d/50-delete.yaml", agent_config(
        "  lifecycle:\n    onDelete: {resetTimeout: 1s}\n"))
    with MachineController(admin) as capi:
        daemon.start()
        wait_until(lambda: hooks(admin).get(HOOK), "the agent's hook")
        admin.call("DELETE", machine_path(admin), ok=(200, 202))
        reset = wait_until(lambda: is_false(admin, "KubeadmReset"), "the reset to time out")
        assert reset["reason"] == "CommandTimeout"
        assert HOOK in hooks(admin) and not capi.gone()  # held while it is tried again
        wait_until(capi.gone, "CAPI to delete the Machine once the node is cleaned up")
    summary = {c["type"]: c for c in capi.final["status"]["conditions"]}["NodeCleanedUp"]
    assert (summary["status"], summary["reason"]) == ("True", "CleanedUp")
    assert "running spec.lifecycle.onDelete again in" in daemon.output()
    assert not (node.root / KUBELET_CONF).exists()
    daemon.stop()


def test_a_reset_that_fails_keeps_the_hook_until_the_service_is_restarted(
        daemon: Daemon, admin: Admin, node: Node, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    broken = failing_kubeadm(tmp_path, monkeypatch, "fail")
    with MachineController(admin) as capi:
        daemon.start()
        wait_until(lambda: hooks(admin).get(HOOK), "the agent's hook")
        admin.call("DELETE", machine_path(admin), ok=(200, 202))
        summary = wait_until(lambda: is_false(admin, "NodeCleanedUp"),
                             "the failure reported")
        assert summary["reason"] == "CommandFailed"
        assert summary["message"].startswith("KubeadmReset: kubeadm reset -f exited 1")
        assert f"annotation {HOOK} is removed" in summary["message"]
        time.sleep(3)  # not tried again on its own, not released
        assert HOOK in hooks(admin) and not capi.gone()
        assert daemon.output().count("kubeadmReset failed") == 1
        assert (node.root / KUBELET_CONF).exists()

        broken.unlink()  # a person fixes it and restarts the service
        daemon.stop()
        daemon.start()
        wait_until(capi.gone, "CAPI to delete the Machine once the node is cleaned up")
    assert not (node.root / KUBELET_CONF).exists()
    daemon.stop()


def test_a_restart_during_the_drain_is_ready_keeps_the_hook_and_waits_for_the_drain(
        daemon: Daemon, admin: Admin, node: Node) -> None:
    drained = threading.Event()
    during_drain: list[bool] = []

    def drain() -> None:  # as long as the test needs
        assert drained.wait(60)
        during_drain.append((node.root / KUBELET_CONF).exists())

    with MachineController(admin, drain) as capi:
        daemon.start()
        wait_until(lambda: hooks(admin).get(HOOK), "the agent's hook")
        admin.call("DELETE", machine_path(admin), ok=(200, 202))
        wait_until(lambda: "runs once CAPI has drained the Node" in daemon.output(),
                   "the daemon to wait for the drain")
        daemon.stop()
        daemon.start()  # READY=1 with no bootstrap to run
        assert "is being deleted" in daemon.output() and HOOK in hooks(admin)
        drained.set()
        wait_until(capi.gone, "CAPI to delete the Machine once the node is cleaned up")
    assert during_drain == [True]
    assert not (node.root / KUBELET_CONF).exists()
    daemon.stop()


def test_a_machine_deleted_before_the_daemon_follows_it_is_not_held(
        daemon: Daemon, admin: Admin, node: Node) -> None:
    drained = threading.Event()
    with MachineController(admin, lambda: drained.wait(60)) as capi:
        admin.call("DELETE", machine_path(admin), ok=(200, 202))
        wait_until(lambda: capi.reasons, "CAPI to drain")
        daemon.start()  # no bootstrap; CAPI may be past the point where hooks count
        assert "is being deleted" in daemon.output()
        drained.set()
        wait_until(capi.gone, "CAPI to delete the Machine")
    assert capi.hooks == []
    # the daemon learns of the deletion from its watch, a moment after CAPI finished
    wait_until(lambda: "without the agent's pre-terminate hook" in daemon.output(),
               "the daemon to see its Machine gone")
    daemon.stop()


def test_a_hook_the_management_cluster_refuses_to_take_off_is_taken_off_later(
        daemon: Daemon, admin: Admin, node: Node, proxy: FaultProxy) -> None:
    with MachineController(admin) as capi:
        daemon.start()
        wait_until(lambda: hooks(admin).get(HOOK), "the agent's hook")
        # Every try of the client's (6) to take the hook off is refused, once.
        proxy.faults.add("500", path=rf"/machines/{MACHINE}$", method="PATCH",
                                count=6)
        admin.call("DELETE", machine_path(admin), ok=(200, 202))
        wait_until(lambda: "taking the pre-terminate hook off again in" in daemon.output(),
                   "the refusal")
        wait_until(capi.gone, "CAPI to delete the Machine once the hook is off")
    daemon.stop()


def test_an_outage_and_a_restart_lose_no_report(
        daemon: Daemon, admin: Admin, node: Node, proxy: FaultProxy) -> None:
    daemon.start()
    wait_until(lambda: is_true(admin, "NodeBootstrapped"), "the bootstrap on the Machine")
    # The management cluster stops taking the agent's reports ...
    refusals = [proxy.faults.add("500", path=r"/machines/[^/]+/status$",
                                        method="PATCH"),
                proxy.faults.add("500", path=r"/events$", method="POST")]
    # ... while the agent has something new to say: a configuration change it applies.
    set_config(admin, agent_config("  time:\n    maxOffset: 500ms\n"))
    wait_until(lambda: {c.type: c.status for c in (read_status(Host(node.root)) or
                                                   ([], False))[0]}.get(
        "AgentConfigApplied") == "True", "the change to be applied on the node")
    assert condition(admin, "AgentConfigApplied") is None
    # A restart in the middle: what was not delivered is in the journal.
    daemon.stop()
    assert pending_reports(node.root)
    daemon.start()
    assert condition(admin, "AgentConfigApplied") is None
    # The outage: every connection cut; reconnects dropped, refused, closed and expired.
    for kind in ("drop", "500", "close_watch", "410"):
        proxy.faults.add(kind, path=r"/(machines|configmaps)$", method="GET",
                                count=2)
    proxy.cut()
    time.sleep(1.0)
    for fault in refusals:
        proxy.faults.clear(fault)
    applied = wait_until(lambda: condition(admin, "AgentConfigApplied"),
                         "the kept report on the Machine")
    assert (applied["status"], applied["reason"]) == ("True", "Reconfigured")
    wait_until(lambda: "Reconfigured" in {e["reason"] for e in admin.events()},
               "the kept Event")
    assert is_true(admin, "NodeBootstrapped")
    took = daemon.stop()
    assert took < 5
    assert not pending_reports(node.root)  # saved as delivered on the way out


def time_config(run: Path, *ports: int) -> str:
    servers = "".join(f"    - {{host: 127.0.0.1, port: {p}, minpoll: -2, maxpoll: 0}}\n"
                      for p in ports)
    return agent_config(f"""  time:
    servers:
{servers}    syncTimeout: 30s
    checkInterval: 200ms
    chrony: {{target: dropin, commandAddress: {run}/client.sock}}
""")


def test_a_changed_time_server_is_applied_to_chronyd_and_the_node_never_joins_again(
        daemon: Daemon, admin: Admin, node: Node,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    ntp_port, dead_port = free_udp_ports(2)  # a server's, and one nobody serves
    run = private_dir(tmp_path_factory.mktemp("c") / "run")  # short: socket paths
    client = run / "client.conf"
    # The node's chronyd, as Debian's chrony.conf sets it up: sources from sources.d.
    sources = node.root / "etc/chrony/sources.d"
    sources.mkdir(parents=True)
    client.write_text(f"sourcedir {sources}\nmakestep 1 3\ndriftfile {run}/drift\nport 0\n"
                      f"cmdport 0\nbindcmdaddress {run}/client.sock\n"
                      f"pidfile {run}/client.pid\n")
    set_config(admin, time_config(run, ntp_port))
    with ntp_server(run, ntp_port), chronyd(client):
        wait_until((run / "client.sock").exists, "the node's chronyd")
        daemon.start()
        wait_until(lambda: is_true(admin, "NodeBootstrapped"), "the bootstrap")
        dropin = sources / "machine-agent.sources"
        assert f"port {dead_port}" not in dropin.read_text()
        kubelet_conf = (node.root / KUBELET_CONF).stat().st_mtime_ns
        joined = Journal.load(Host(node.root)).phases["join"]

        set_config(admin, time_config(run, ntp_port, dead_port))
        applied = wait_until(lambda: is_true(admin, "AgentConfigApplied") and condition(
            admin, "AgentConfigApplied"), "the change on the Machine")
        assert applied["reason"] == "Reconfigured"
        digest = content_digest(time_config(run, ntp_port, dead_port))
        assert applied["message"] == \
            f"configmap {admin.ns}/{CONFIGMAP} ({digest}) applied to network, time, join"
        assert f"server 127.0.0.1 port {dead_port}" in dropin.read_text()
        synced = condition(admin, "TimeSynchronized")
        assert synced is not None and synced["status"] == "True", synced
        assert f"unreachable: 127.0.0.1:{dead_port}" in synced["message"]
        assert "chronyc" in daemon.output() and "reload sources" in daemon.output()
        # Never joined again: the join's record and kubelet.conf are as they were.
        assert Journal.load(Host(node.root)).phases["join"] == joined
        assert (node.root / KUBELET_CONF).stat().st_mtime_ns == kubelet_conf
        assert daemon.output().count("kubeadm join, attempt") == 1
        daemon.stop()


def false_condition(admin: Admin, kind: str) -> dict[str, Any] | None:
    found = condition(admin, kind)
    return found if found is not None and found["status"] == "False" else None


def test_a_mistake_in_the_configmap_is_reported_on_the_machine_and_its_fix_bootstraps_the_node(
        daemon: Daemon, admin: Admin, node: Node) -> None:
    set_config(admin, agent_config("  tme: {}\n"))
    daemon.start()  # READY=1: the outcome (refused) is known
    refused = wait_until(lambda: false_condition(admin, "NodeBootstrapped"),
                         "the refusal on the Machine")
    assert refused["reason"] == "ConfigInvalid"
    assert f"configmap {admin.ns}/{CONFIGMAP}" in refused["message"]
    assert "spec.tme" in refused["message"]
    wait_until(lambda: "ConfigInvalid" in {e["reason"] for e in admin.events()},
               "an Event saying why")
    assert daemon.proc is not None and daemon.proc.poll() is None  # it stays, watching

    set_config(admin, agent_config("  time:\n    maxOffset: 250ms\n"))
    wait_until(lambda: is_true(admin, "NodeBootstrapped"), "the bootstrap after the fix")
    applied = condition(admin, "AgentConfigApplied")
    assert applied is not None and (applied["status"], applied["reason"]) == (
        "True", "Reconfigured"), applied
    digest = content_digest(agent_config("  time:\n    maxOffset: 250ms\n"))
    assert applied["message"].startswith(f"configmap {admin.ns}/{CONFIGMAP} ({digest}): "
                                         "the bootstrap ran again with it and completed")
    assert daemon.output().count("kubeadm join, attempt") == 1
    daemon.stop()


def test_a_join_refused_by_preflight_joins_once_the_configmap_ignores_the_check(
        daemon: Daemon, admin: Admin, node: Node) -> None:
    (node.root / "proc/swaps").write_text("Filename\tType\tSize\tUsed\tPriority\n"
                                          "/swapfile\tfile\t1048572\t0\t-2\n")
    daemon.start()
    refused = wait_until(lambda: false_condition(admin, "NodeJoined"), "the join's failure")
    assert refused["reason"] == "PreflightFailed", refused

    set_config(admin, agent_config("  time:\n    maxOffset: 250ms\n  join:\n"
                                   "    nodeRegistration: {ignorePreflightErrors: [Swap]}\n"))
    wait_until(lambda: is_true(admin, "NodeBootstrapped"), "the bootstrap after the fix")
    applied = condition(admin, "AgentConfigApplied")
    assert applied is not None and (applied["status"], applied["reason"]) == (
        "True", "Reconfigured"), applied
    assert "join applied" in applied["message"], applied
    assert is_true(admin, "NodeJoined")
    daemon.stop()


def test_a_configmap_broken_while_the_daemon_was_stopped_leaves_a_joined_node_ready(
        daemon: Daemon, admin: Admin, node: Node) -> None:
    daemon.start()
    ready = wait_until(lambda: is_true(admin, "NodeBootstrapped") and condition(
        admin, "NodeBootstrapped"), "the bootstrap on the Machine")
    daemon.stop()
    set_config(admin, agent_config("  tme: {}\n"))

    daemon.start()
    refused = wait_until(lambda: false_condition(admin, "AgentConfigApplied"),
                         "the refusal on the Machine")
    assert refused["reason"] == "ConfigInvalid" and "spec.tme" in refused["message"]
    assert condition(admin, "NodeBootstrapped") == ready  # the readiness gate never moved

    set_config(admin, agent_config("  time:\n    maxOffset: 300ms\n"))
    applied = wait_until(lambda: is_true(admin, "AgentConfigApplied") and condition(
        admin, "AgentConfigApplied"), "the fix applied")
    digest = content_digest(agent_config("  time:\n    maxOffset: 300ms\n"))
    assert (applied["reason"], applied["message"]) == (
        "Reconfigured",
        f"configmap {admin.ns}/{CONFIGMAP} ({digest}) applied to network, time, join")
    assert condition(admin, "NodeBootstrapped") == ready
    assert daemon.output().count("kubeadm join, attempt") == 1
    daemon.stop()
