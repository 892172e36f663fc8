"""In-place updates of a sandbox node, driven as Cluster API drives them: the node's daemon
follows its AgentConfig object, the update extension runs as its own HTTPS process beside
the API server, and UpdateMachine is called (and called again after retryAfterSeconds)
with a KubeadmConfig whose NTP servers, kubelet flags or files changed (and, replayed,
the requests Cluster API's own controllers sent). A change the node can make is made
without a second join; one that fails its trial is rolled back, and the reason reaches
both the Machine and the hook's answer."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from machine_agent_sandbox.cluster import Admin
from machine_agent_sandbox.kubeadm.kubelet_service import HEALTHZ_PORT
from machine_agent_sandbox.kubeadm.node import KUBELET_PROGRAM
from machine_agent_sandbox.netns import DATA_LINK, GATEWAY, NTP_ADDRESS
from machine_agent_sandbox.node import Node
from machine_agent_sandbox.sandbox import Sandbox
from machine_agent_sandbox.updates import (
    ADD_SERVER,
    DEMO_FILE,
    FILE_V1,
    FILE_V1_PRIVATE,
    FILE_V2_BAD_FLAG,
    MAX_PODS,
    PATCH_RELEASE,
    UNANSWERED,
    UPDATES,
    config_object,
    follow_config_object,
    play_update,
    start_daemon,
    start_extension,
    update_request,
    wait_bootstrapped,
)

from agent.host import Host
from agent.inplace.update import InPlace
from agent.kube.machine_config import content_digest
from agent.phases.join.kubeletflags import parse
from agent.phases.join.result import JoinRecord
from agent.state import Journal

pytestmark = pytest.mark.allow_processes


@dataclass
class Serving:
    """A sandbox node bootstrapped under the agent's daemon, following its AgentConfig
    object, and the update extension beside the API server (its caller)."""

    box: Sandbox
    node: Node
    caller: Admin


@pytest.fixture
def serving(bring_up: Callable[[int], Sandbox]) -> Serving:
    box = bring_up(1)
    (node,) = box.nodes
    follow_config_object(box, node)
    start_daemon(box, node)
    wait_bootstrapped(box, node)
    return Serving(box, node, start_extension(box))


def test_an_ntp_change_is_made_in_place_and_a_failing_one_rolled_back_with_its_reason(
        serving: Serving) -> None:
    box, node, caller = serving.box, serving.node, serving.caller
    joined = Journal.load(Host(node.root)).section(JoinRecord).attempts
    sources = node.root / "etc/chrony/chrony.conf"

    answers: list[dict[str, object]] = []
    final = play_update(caller, update_request(box, node, ADD_SERVER), answers.append)
    assert final["status"] == "Success", answers
    assert answers[0].get("retryAfterSeconds"), answers  # in progress until the node proved it
    text = sources.read_text()
    assert f"server {NTP_ADDRESS}" in text and f"server {UNANSWERED}" in text, text
    applied = box.conditions(node)["AgentConfigApplied"]
    assert applied["status"] == "True", applied

    fault = UPDATES["update-ntp-down"]
    final = play_update(caller, update_request(box, node, fault), lambda a: None)
    assert final["status"] == "Failure", final
    conditions = box.conditions(node)
    refused = conditions["AgentConfigApplied"]
    assert (refused["status"], refused["reason"]) == ("False", str(fault.reason)), refused
    assert f"kept the previous configuration, {fault.reason}: {refused['message']}" in str(
        final["message"]), (final, refused)
    assert sources.read_text() == text  # rolled back: the servers of the update before
    assert conditions["NodeBootstrapped"]["status"] == "True"  # the node stays in service
    assert Journal.load(Host(node.root)).section(JoinRecord).attempts == joined  # no new join


def test_the_demo_shows_a_failing_update_rolled_back_and_leaves_nothing_behind() -> None:
    demo = subprocess.run([sys.executable, "-m", "agent.cli", "demo", "--fault",
                           "update-ntp-down"], capture_output=True, text=True, timeout=120)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    out = demo.stdout
    assert "as expected: the change was tried and rolled back" in out
    assert "answer: Failure: the agent on Machine demo/demo-worker-0 refused the change and " \
           "kept the previous configuration, TimeNotSynchronized" in out
    assert "reason: TimeNotSynchronized" in out
    base = Path(next(w for w in out.split() if w.startswith("/tmp/ma-sandbox-")).split("/n0")[0])
    assert not base.exists()
    # the daemon and the extension ended with the sandbox
    assert not [p for p in Path("/proc").glob("[0-9]*/cmdline")
                if str(base).encode() in _read(p)]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # the process ended meanwhile
        return b""


def test_a_kubelet_flag_is_set_in_place_and_one_the_kubelet_refuses_rolled_back(
        serving: Serving) -> None:
    box, node, caller = serving.box, serving.node, serving.caller
    joined = Journal.load(Host(node.root)).section(JoinRecord).attempts
    flags = node.root / "var/lib/kubelet/kubeadm-flags.env"
    as_kubeadm_wrote = flags.read_text()

    final = play_update(caller, update_request(box, node, MAX_PODS), lambda a: None)
    assert final["status"] == "Success", final
    changed = flags.read_text()
    assert parse(changed) == {**parse(as_kubeadm_wrote), "max-pods": "200"}
    assert _healthz(box, node) == "ok"  # the kubelet restarted with them, healthy

    fault = UPDATES["update-kubelet-flag"]
    final = play_update(caller, update_request(box, node, fault), lambda a: None)
    assert final["status"] == "Failure", final
    refused = box.conditions(node)["AgentConfigApplied"]
    assert (refused["status"], refused["reason"]) == ("False", "KubeletNotHealthy"), refused
    assert "--no-such-flag=1" in refused["message"]
    assert f"KubeletNotHealthy: {refused['message']}" in str(final["message"])
    assert flags.read_text() == changed  # rolled back to the flags of the update before
    assert _healthz(box, node) == "ok"  # and the kubelet restarted healthy with them
    assert "unknown flag: --no-such-flag" in (node.root / "var/log/kubelet.log").read_text()
    assert box.conditions(node)["NodeBootstrapped"]["status"] == "True"
    assert Journal.load(Host(node.root)).section(JoinRecord).attempts == joined  # no new join


def _healthz(box: Sandbox, node: Node) -> str:
    """The kubelet's healthz as the agent asks it, from inside the node's namespace."""
    done = subprocess.run(["ip", "netns", "exec", node.netns, sys.executable, "-c",
                           "from agent.phases.join.kubeletrestart import healthz; "
                           f"print(healthz('http://127.0.0.1:{HEALTHZ_PORT}/healthz'))"],
                          capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.strip()


def test_plan_shows_a_pending_in_place_change_and_status_its_outcome(
        bring_up: Callable[[int], Sandbox]) -> None:
    """The operator's view on the node: what the Machine's AgentConfig object asks that
    the node does not run yet (`plan`, with the digest the update waits for), then, once
    the daemon applied it, `status` with AgentConfigApplied and a plan with nothing left."""
    box = bring_up(1)
    (node,) = box.nodes
    follow_config_object(box, node)
    code, lines = node.run("run")
    assert code == 0, "\n".join(lines)
    path = f"/api/v1/namespaces/{box.admin.ns}/configmaps/{config_object(node)}"
    text = InPlace(servers=ADD_SERVER.servers, kubelet_args=MAX_PODS.kubelet_args,
                   release=PATCH_RELEASE.release).applied_to(
        box.admin.call("GET", path)["data"]["config.yaml"])
    box.admin.call("PATCH", path, {"data": {"config.yaml": text}},
                   content_type="application/merge-patch+json")
    code, plan = node.run("plan")
    shown = "\n".join(plan)
    assert code == 0, shown
    assert (f"configuration: the node's files and configmap {box.admin.ns}/"
            f"{config_object(node)} ({content_digest(text)})") in shown
    assert "set the kubelet's flags in place (--max-pods=200)" in shown
    assert f"+server {UNANSWERED} iburst" in shown
    assert "+KUBELET_KUBEADM_ARGS=\"--max-pods=200\"" in shown
    assert ("upgrade the node from Kubernetes v1.31.2 to v1.31.3 in place: kubeadm upgrade "
            "node, the kubelet of /opt/machine-agent/kubernetes/v1.31.3") in shown

    start_daemon(box, node)
    deadline = time.monotonic() + 60
    while (box.conditions(node).get("AgentConfigApplied") or {}).get("status") != "True":
        assert time.monotonic() < deadline, box.conditions(node)
        time.sleep(0.5)
    code, status = node.run("status")
    applied = next(line for line in status if line.startswith("AgentConfigApplied"))
    assert "True" in applied and content_digest(text) in applied, status
    code, plan = node.run("plan")
    assert code == 0 and not [line for line in plan if line.lstrip().startswith("~ ")], plan
    assert _kubelet_release(node) == "Kubernetes v1.31.3"


def _recorded_updates(name: str) -> list[tuple[dict[str, Any], list[str]]]:
    """Each change's first UpdateMachine request as Cluster API sent it (recorded in
    tests/fixtures/real-capi/NAME.json), with the statuses the extension answered it, in
    order (in progress, then final)."""
    recorded = json.loads((Path(__file__).parents[1] / f"fixtures/real-capi/{name}.json")
                          .read_text())["hook_calls"]
    groups: list[tuple[dict[str, Any], list[str]]] = []
    for call in recorded:
        if call["path"].endswith("can-update-machineset"):
            groups.append(({}, []))
        elif call["path"].endswith("update-machine"):
            request, answers = groups[-1]
            request.update(request or copy.deepcopy(call["request"]))
            status = call["response"]["status"]
            answers.append("in progress" if call["response"].get("retryAfterSeconds")
                           else status)
    return groups


def _as_the_recorded_node(node: Node, name: str) -> None:
    """What the recorded node ran after both changes, the second one rolled back."""
    if name == "in-place-sandbox-node":  # workers-v2, then v3's bad flag rolled back
        flags = (node.root / "var/lib/kubelet/kubeadm-flags.env").read_text()
        assert parse(flags)["max-pods"] == "200"
        chrony = (node.root / "etc/chrony/chrony.conf").read_text()
        assert f"server {NTP_ADDRESS}" in chrony and "server 198.51.100.123" in chrony
    else:  # v1.31.3, then v1.31.4's kubelet put back
        assert _kubelet_release(node) == "Kubernetes v1.31.3"


@pytest.mark.parametrize("name", ["in-place-sandbox-node", "in-place-release-sandbox-node"])
def test_the_real_controllers_update_calls_replayed_on_a_sandbox_node(
        serving: Serving, name: str) -> None:
    """Cluster API v1.14's UpdateMachine requests, recorded while a sandbox node's daemon
    carried them out, replayed on this one: the same answers in the same order (in
    progress, Success; in progress, Failure), the node as the recorded one was after
    them (template rotations: the kubelet's flags and chronyd's servers; patch releases:
    the kubelet's release)."""
    box, node, caller = serving.box, serving.node, serving.caller
    for request, recorded in _recorded_updates(name):
        request["desired"]["machine"]["metadata"].update(name=node.name,
                                                         namespace=box.admin.ns)
        seen: list[dict[str, Any]] = []
        play_update(caller, request, seen.append)
        answers = ["in progress" if a.get("retryAfterSeconds") else str(a["status"])
                   for a in seen]
        assert answers[0] == recorded[0] == "in progress"
        assert answers[-1] == recorded[-1], (answers, recorded)
    _as_the_recorded_node(node, name)


def test_files_are_written_in_place_and_put_back_when_the_change_fails(
        serving: Serving) -> None:
    """A file written by an in-place update; then an update that changes it, adds another
    and fails on the kubelet: both files are as they were before it (the new one gone)."""
    box, node, caller = serving.box, serving.node, serving.caller
    demo, new = node.root / DEMO_FILE.lstrip("/"), node.root / "etc/machine-agent-new.conf"

    final = play_update(caller, update_request(box, node, FILE_V1), lambda a: None)
    assert final["status"] == "Success", final
    assert demo.read_text() == "generation 1\n" and demo.stat().st_mode & 0o7777 == 0o644

    final = play_update(caller, update_request(box, node, FILE_V1_PRIVATE), lambda a: None)
    assert final["status"] == "Success", final
    assert demo.read_text() == "generation 1\n" and demo.stat().st_mode & 0o7777 == 0o600

    final = play_update(caller, update_request(box, node, FILE_V2_BAD_FLAG), lambda a: None)
    assert final["status"] == "Failure" and "KubeletNotHealthy" in str(final["message"])
    assert demo.read_text() == "generation 1\n"  # put back
    assert not new.exists()  # it was not there before the change
    log = (box.registry.base / f"{node.name}-daemon.log").read_text()
    assert "create /etc/machine-agent-new.conf (mode 0600) (kept in place)" in log  # tried
    assert "remove /etc/machine-agent-new.conf (no longer in spec.join.files" in log
    assert box.conditions(node)["NodeBootstrapped"]["status"] == "True"


def test_a_network_change_whose_gateway_does_not_answer_is_rolled_back(
        serving: Serving) -> None:
    """The operator moves the node's default gateway, in its AgentConfig object, to an
    address nothing answers on: the daemon tries the change, the gateway stays silent, the
    node's routes are put back as they were and the Machine says why; the node stays in
    service and reaches the management cluster all along (it reported)."""
    box, node = serving.box, serving.node
    routes = _routes(node)
    assert f"default via {GATEWAY}" in routes
    local = yaml.safe_load((node.root / "etc/machine-agent/config.yaml").read_text())
    network = copy.deepcopy(local["spec"]["network"])
    network["interfaces"][0]["gateway"] = SILENT_GATEWAY
    path = f"/api/v1/namespaces/{box.admin.ns}/configmaps/{config_object(node)}"
    text = yaml.safe_load(box.admin.call("GET", path)["data"]["config.yaml"])
    text["spec"]["network"] = network
    changed = yaml.safe_dump(text, sort_keys=False)
    box.admin.call("PATCH", path, {"data": {"config.yaml": changed}},
                   content_type="application/merge-patch+json")
    deadline = time.monotonic() + 60
    while content_digest(changed) not in str(
            (applied := box.conditions(node).get("AgentConfigApplied") or {}).get("message")):
        assert time.monotonic() < deadline, box.conditions(node)
        time.sleep(0.5)
    assert (applied["status"], applied["reason"]) == ("False", "GatewayUnreachable"), applied
    assert f"gateway {SILENT_GATEWAY}" in applied["message"], applied
    assert _routes(node) == routes  # rolled back: the default route via the old gateway
    assert box.conditions(node)["NodeBootstrapped"]["status"] == "True"


SILENT_GATEWAY = "192.0.2.254"
"""On the node's segment, with nothing there to answer neighbour resolution."""


def _routes(node: Node) -> str:
    """The routes the network phase owns: those on the node's data link (the CNI bridge's
    carrier, and so its route's `linkdown`, comes and goes with the pods on it)."""
    return subprocess.run(["ip", "-n", node.netns, "route", "show", "dev", DATA_LINK],
                          capture_output=True, text=True, timeout=10, check=True).stdout


def test_a_patch_release_is_made_in_place_and_one_whose_kubelet_fails_put_back(
        serving: Serving) -> None:
    """The Machine's version moves to v1.31.3: the node runs that release's `kubeadm
    upgrade node` and its kubelet, restarted healthy, without a second join. Then to
    v1.31.4, whose kubelet does not run: v1.31.3's kubelet and configuration are put back
    and restarted, and the reason reaches the Machine and the hook. A release the node
    does not carry is refused before anything changes."""
    box, node, caller = serving.box, serving.node, serving.caller
    joined = Journal.load(Host(node.root)).section(JoinRecord).attempts
    config = node.root / "var/lib/kubelet/config.yaml"
    config.write_text(config.read_text() + "# as the node had it\n")

    final = play_update(caller, update_request(box, node, PATCH_RELEASE), lambda a: None)
    assert final["status"] == "Success", final
    assert _kubelet_release(node) == "Kubernetes v1.31.3"
    assert _healthz(box, node) == "ok"
    assert "# as the node had it" not in config.read_text()  # the cluster's, from kubeadm
    world = json.loads(node.world.read_text())
    assert world["invocations"].count("upgrade node") == 1
    assert "(Kubernetes v1.31.3)" in box.conditions(node)["NodeJoined"]["message"]
    upgraded = config.read_text()

    fault = UPDATES["update-release-broken"]
    final = play_update(caller, update_request(box, node, fault), lambda a: None)
    assert final["status"] == "Failure", final
    refused = box.conditions(node)["AgentConfigApplied"]
    assert (refused["status"], refused["reason"]) == ("False", "KubeletNotHealthy"), refused
    assert "Kubernetes v1.31.4" in refused["message"], refused
    assert "check /opt/machine-agent/kubernetes/v1.31.4/kubelet" in refused["message"]
    assert _kubelet_release(node) == "Kubernetes v1.31.3"  # put back
    assert config.read_text() == upgraded
    assert _healthz(box, node) == "ok"
    assert "Exec format error" in (node.root / "var/log/kubelet.log").read_text()

    missing = replace(PATCH_RELEASE, release="v1.31.9")
    final = play_update(caller, update_request(box, node, missing), lambda a: None)
    assert final["status"] == "Failure", final
    refused = box.conditions(node)["AgentConfigApplied"]
    assert refused["reason"] == "NotOnImage", refused
    assert "/opt/machine-agent/kubernetes/v1.31.9" in refused["message"], refused
    assert _kubelet_release(node) == "Kubernetes v1.31.3"
    assert box.conditions(node)["NodeBootstrapped"]["status"] == "True"
    assert Journal.load(Host(node.root)).section(JoinRecord).attempts == joined  # no new join


def _kubelet_release(node: Node) -> str:
    return subprocess.run([str(node.root / KUBELET_PROGRAM), "--version"],
                          capture_output=True, text=True, timeout=30,
                          check=True).stdout.strip()
