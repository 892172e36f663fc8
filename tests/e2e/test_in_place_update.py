"""An in-place update of a sandbox node, driven as Cluster API drives it: the node's daemon
follows its AgentConfig object, the update extension runs as its own HTTPS process beside
the API server, and UpdateMachine is called (and called again after retryAfterSeconds)
with a KubeadmConfig whose ntp servers changed. A change the node can make is made, with
the node's chronyd on the new servers and no second join; one that fails its trial is
rolled back, and the reason reaches both the Machine and the hook's answer."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from machine_agent_sandbox.netns import NTP_ADDRESS
from machine_agent_sandbox.sandbox import Sandbox
from machine_agent_sandbox.updates import (
    ADD_SERVER,
    UNANSWERED,
    UPDATES,
    follow_config_object,
    play_update,
    start_daemon,
    start_extension,
    update_request,
    wait_bootstrapped,
)

from agent.host import Host
from agent.state import Journal

pytestmark = pytest.mark.allow_processes


def test_an_ntp_change_is_made_in_place_and_a_failing_one_rolled_back_with_its_reason(
        bring_up: Callable[[int], Sandbox]) -> None:
    box = bring_up(1)
    (node,) = box.nodes
    follow_config_object(box, node)
    start_daemon(box, node)
    wait_bootstrapped(box, node)
    joined = Journal.load(Host(node.root)).phases["join"]
    caller = start_extension(box)
    sources = node.root / "etc/chrony/chrony.conf"

    answers: list[dict[str, object]] = []
    final = play_update(caller, update_request(box, node, ADD_SERVER.servers), answers.append)
    assert final["status"] == "Success", answers
    assert answers[0].get("retryAfterSeconds"), answers  # in progress until the node proved it
    text = sources.read_text()
    assert f"server {NTP_ADDRESS}" in text and f"server {UNANSWERED}" in text, text
    applied = box.conditions(node)["AgentConfigApplied"]
    assert applied["status"] == "True", applied

    fault = UPDATES["update-ntp-down"]
    final = play_update(caller, update_request(box, node, fault.servers), lambda a: None)
    assert final["status"] == "Failure", final
    conditions = box.conditions(node)
    refused = conditions["AgentConfigApplied"]
    assert (refused["status"], refused["reason"]) == ("False", str(fault.reason)), refused
    assert f"kept the previous configuration, {fault.reason}: {refused['message']}" in str(
        final["message"]), (final, refused)
    assert sources.read_text() == text  # rolled back: the servers of the update before
    assert conditions["NodeBootstrapped"]["status"] == "True"  # the node stays in service
    assert Journal.load(Host(node.root)).phases["join"] == joined  # never joined again


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
