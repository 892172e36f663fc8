"""A joined node's patch release changed in place (agent.phases.join.release), with the
kubeadm stand-in's `upgrade node` and releases as an image carries them: made, refused,
put back, and carried on or undone after a run cut short at each step."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from machine_agent_sandbox.kubeadm.node import KUBELET_PROGRAM
from machine_agent_sandbox.kubeadm_standin import install, install_release

from agent.config.join import JoinSpec
from agent.config.model import AgentConfig, AgentSpec
from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.phases.base import Change
from agent.phases.context import PhaseContext
from agent.phases.join.release import KEPT, release_changes
from agent.phases.join.result import JoinRecord, ReleaseChange
from agent.state import Journal

pytestmark = pytest.mark.allow_processes

NODE_CONFIG = "# the node's kubelet configuration\n"


@contextlib.contextmanager
def healthz() -> Iterator[str]:
    """The kubelet's healthz, answering ok, on an ephemeral loopback port."""
    class Ok(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/healthz"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[Host, JoinSpec]]:
    root = tmp_path / "root"
    world = tmp_path / "world.json"
    world.write_text(json.dumps({"version": "v1.31.2"}))
    install(tmp_path / "bin", root, world)
    install_release(root, world, "v1.31.3")
    install_release(root, world, "v1.31.4", broken=True)
    for path, text in (("etc/kubernetes/kubelet.conf", "apiVersion: v1\n"),
                       ("var/lib/kubelet/config.yaml", NODE_CONFIG)):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    with healthz() as url:
        yield Host(root), JoinSpec(kubelet_restart_command=["true"], kubelet_healthz=url)


def context(host: Host, spec: JoinSpec, release: str | None) -> PhaseContext:
    config = AgentConfig("machine-agent.io/v1alpha1", "AgentConfig",
                         AgentSpec(join=replace(spec, in_place_version=release)))
    return PhaseContext(config, host, Journal.load(host), {},
                        lambda m, r=Reason.InProgress: None, logging.getLogger("test"))


def apply(host: Host, changes: list[Change]) -> None:
    for change in changes:
        change.action(host)


def kubelet(host: Host) -> str:
    return host.run([str(host.path("/" + KUBELET_PROGRAM)), "--version"],
                    mutates=False).stdout.strip()


def test_a_patch_release_is_made_and_a_rollback_puts_the_one_before_back(
        node: tuple[Host, JoinSpec]) -> None:
    host, spec = node
    apply(host, release_changes(context(host, spec, "v1.31.3")))
    assert kubelet(host) == "Kubernetes v1.31.3"
    assert host.read_text("/var/lib/kubelet/config.yaml") != NODE_CONFIG  # kubeadm's
    assert release_changes(context(host, spec, "v1.31.3")) == []  # done: nothing again
    record = Journal.load(host).section(JoinRecord).release
    assert record == ReleaseChange("v1.31.3", "v1.31.2", done=True)

    back = release_changes(context(host, spec, None))  # the configuration of before
    assert [c.key for c in back] == ["release-back:v1.31.2"]
    apply(host, back)
    assert kubelet(host) == "Kubernetes v1.31.2"
    assert host.read_text("/var/lib/kubelet/config.yaml") == NODE_CONFIG
    assert not host.exists(KEPT)
    assert release_changes(context(host, spec, None)) == []


def test_a_kubelet_that_does_not_run_fails_the_change_and_the_rollback_puts_it_back(
        node: tuple[Host, JoinSpec]) -> None:
    host, spec = node
    with pytest.raises(PermanentError, match=re.escape("the kubelet of v1.31.4 does not run")):
        apply(host, release_changes(context(host, spec, "v1.31.4")))
    assert "Exec format error" in host.run([str(host.path("/" + KUBELET_PROGRAM)),
                                            "--version"], check=False).stderr
    apply(host, release_changes(context(host, spec, None)))  # the rollback
    assert kubelet(host) == "Kubernetes v1.31.2"
    assert host.read_text("/var/lib/kubelet/config.yaml") == NODE_CONFIG


def test_a_release_the_node_does_not_carry_is_refused_before_anything_changes(
        node: tuple[Host, JoinSpec]) -> None:
    host, spec = node
    with pytest.raises(PermanentError, match=re.escape(
            "Kubernetes v1.31.9 is not on this node: kubeadm, kubelet missing or not "
            "executable in /opt/machine-agent/kubernetes/v1.31.9")):
        release_changes(context(host, spec, "v1.31.9"))
    assert kubelet(host) == "Kubernetes v1.31.2"
    assert Journal.load(host).section(JoinRecord).release is None


@pytest.mark.parametrize("release", ["v1.32.0", "v1.31.1", "v1.30.9"])
def test_a_release_that_is_no_newer_patch_is_left_alone_with_a_warning(
        node: tuple[Host, JoinSpec], release: str, caplog: pytest.LogCaptureFixture) -> None:
    """The AgentConfig object is shared by a MachineDeployment's nodes, some of them newer
    already; a minor release is a rollout."""
    host, spec = node
    assert release_changes(context(host, spec, release)) == []
    assert f"{release} is not a newer patch release of v1.31.2" in caplog.text
    assert kubelet(host) == "Kubernetes v1.31.2"


def test_a_change_cut_short_is_finished_by_the_next_run_or_undone_by_a_rollback(
        node: tuple[Host, JoinSpec]) -> None:
    """Killed after the change was journaled and kubeadm ran, before the kubelet was
    installed: asked again, the next run finishes it without keeping the half-changed
    state as the one to go back to; a rollback instead puts the release before back."""
    host, spec = node
    (change,) = release_changes(context(host, spec, "v1.31.3"))
    ctx = context(host, spec, "v1.31.3")
    record = ctx.journal.section(JoinRecord)
    host.write_file(f"{KEPT}/kubelet", host.read_bytes("/" + KUBELET_PROGRAM), mode=0o700)
    host.write_file(f"{KEPT}/config.yaml", NODE_CONFIG.encode(), mode=0o600)
    record.release = ReleaseChange("v1.31.3", "v1.31.2")
    ctx.journal.save()
    host.write_file("/var/lib/kubelet/config.yaml", "# kubeadm's, half-way\n")

    again = release_changes(context(host, spec, "v1.31.3"))
    assert [c.key for c in again] == [change.key]
    apply(host, again)
    assert kubelet(host) == "Kubernetes v1.31.3"
    assert host.read_text(f"{KEPT}/config.yaml") == NODE_CONFIG  # not the half-way one

    apply(host, release_changes(context(host, spec, "v1.31.2")))  # the rollback
    assert kubelet(host) == "Kubernetes v1.31.2"
    assert host.read_text("/var/lib/kubelet/config.yaml") == NODE_CONFIG
