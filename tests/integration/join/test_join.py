"""Joining from CABPK bootstrap data, as a user sees it: conditions, files, the journal."""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import socket
import threading

import pytest
from machine_agent_sandbox.testkit.bootstrap import FRESH_TOKEN, TOKEN, cloud_config

from agent.errors import AgentError, Reason
from agent.kube.facts import MachineFacts
from agent.orchestrator import Orchestrator
from agent.phases.base import PhaseContext
from agent.phases.join import JoinPhase
from agent.phases.join.cloudconfig import secret_summary
from agent.phases.join.result import JoinRecord
from agent.report import Condition
from agent.state import Journal
from tests.integration.join.conftest import Node, NoSleep, machine_facts


class Said:
    """Every NodeJoined message published, progress included."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def publish(self, conditions: list[Condition], final: bool) -> None:
        self.messages += [c.message for c in conditions if c.type == "NodeJoined"]


def sh(script: str) -> str:
    """How a runcmd string entry is named anywhere it is shown (never its text)."""
    return secret_summary("sh -c", [script])


def journal_text(node: Node) -> str:
    return node.file("/var/lib/machine-agent/journal.json").read_text()


def test_cabpk_bootstrap_data_is_written_run_and_joined(node: Node) -> None:
    data = cloud_config(node.endpoint, pre=("echo pre-kubeadm",), post=("echo post-kubeadm",))
    result, machine = node.run(node.configure({}), machine_facts(data))
    joined = machine.conditions["NodeJoined"]
    assert result.ok, result.outcomes
    assert (joined.status, joined.reason) == ("True", "Joined")
    assert joined.message == (f"Node worker-0 joined https://{node.endpoint} "
                              "(Kubernetes v1.31.2); Node worker-0 registered")
    assert result.outcomes[0].message == joined.message
    assert node.joined() and node.world["joins"] == ["worker-0"]
    # the kubelet registered its Node, with its own credentials, NotReady until the CNI
    registered = node.registered()
    assert registered is not None
    conditions = {c["type"]: c for c in registered["status"]["conditions"]}
    ready = conditions["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "KubeletNotReady")
    # and the pressure conditions a real kubelet posts beside it (CAPI's NodeHealthy)
    assert {conditions[k]["status"] for k in ("MemoryPressure", "DiskPressure",
                                               "PIDPressure")} == {"False"}
    config = node.file("/run/kubeadm/kubeadm-join-config.yaml")
    assert config.stat().st_mode & 0o777 == 0o640
    assert "name: 'worker-0'" in config.read_text()  # the jinja node name, filled in
    assert node.file("/run/cluster-api/bootstrap-success.complete").read_text() == "success\n"
    commands = json.loads(journal_text(node))["extra"]["join"]["commands"]
    # commands are named by program, size and digest: their arguments may hold secrets
    assert [(c["command"], c["exitStatus"], c["outputTail"]) for c in commands] == [
        (sh("echo pre-kubeadm"), 0, "pre-kubeadm"), (sh("echo post-kubeadm"), 0, "post-kubeadm")]
    for text in (journal_text(node),
                 node.file("/var/lib/machine-agent/status.json").read_text()
                 if node.file("/var/lib/machine-agent/status.json").exists() else "",
                 json.dumps([c.message for c in machine.conditions.values()])):
        assert TOKEN not in text


def test_a_failing_runcmd_command_does_not_stop_the_others_and_fails_the_phase(
        node: Node) -> None:
    data = cloud_config(node.endpoint, pre=("echo pre-one; exit 3", "echo pre-two"),
                        post=("echo broken >&2; exit 5", "echo post-two"))
    loaded, facts = node.configure({}), machine_facts(data)
    result, machine = node.run(loaded, facts)
    joined = machine.conditions["NodeJoined"]
    assert not result.ok
    assert (joined.status, joined.reason) == ("False", "CommandFailed")
    assert joined.message == (
        "2 runcmd command(s) failed (the other steps ran, the node joined): "
        f"runcmd[0] `{sh('echo pre-one; exit 3')}` exited 3: pre-one; "
        f"runcmd[3] `{sh('echo broken >&2; exit 5')}` exited 5: broken (fix preKubeadmCommands/"
        "postKubeadmCommands; every command's exit status and output tail is in the journal)")
    # every command ran, in order, around the managed join, which still joined
    assert node.joined() and node.world["joins"] == ["worker-0"]
    assert node.file("/run/cluster-api/bootstrap-success.complete").exists()
    commands = json.loads(journal_text(node))["extra"]["join"]["commands"]
    assert [(c["index"], c["exitStatus"], c["outputTail"]) for c in commands] == [
        (0, 3, "pre-one"), (1, 0, "pre-two"), (3, 5, "broken"), (4, 0, "post-two")]
    # a joined node does not run runcmd again, and the condition keeps naming the failure
    again, machine = node.run(loaded, facts)
    joined = machine.conditions["NodeJoined"]
    assert again.ok and joined.reason == "Joined"
    assert joined.message.endswith(
        f"; failed in an earlier run and not run again: runcmd[0] `{sh('echo pre-one; exit 3')}`, "
        f"runcmd[3] `{sh('echo broken >&2; exit 5')}`")
    assert len(json.loads(journal_text(node))["extra"]["join"]["commands"]) == 4


def test_a_failed_command_runs_again_when_the_join_is_retried(node: Node) -> None:
    marker = node.file("/run/pre-ran")
    data = cloud_config(node.endpoint, pre=(f"test -e {marker} || {{ touch {marker}; "
                                            "echo first; exit 1; }", "echo steady"))
    node.set_world(failNext=["kubelet-unhealthy"])
    loaded = node.configure({"maxAttempts": 1})
    _, machine = node.run(loaded, machine_facts(data))
    joined = machine.conditions["NodeJoined"]
    assert joined.reason == "KubeletNotHealthy"
    # the join's own failure first, and the pre-command that failed before it named too
    script = f"test -e {marker} || {{ touch {marker}; echo first; exit 1; }}"
    assert f"; before it, 1 runcmd command(s) failed: runcmd[0] `{sh(script)}`" \
           in joined.message and "exited 1: first" in joined.message
    second, machine = node.run(loaded, machine_facts(data))
    assert second.ok and machine.conditions["NodeJoined"].message == (
        f"Node worker-0 joined https://{node.endpoint} (Kubernetes v1.31.2); Node worker-0 "
        "registered")  # the failure was made good: no longer named
    commands = json.loads(journal_text(node))["extra"]["join"]["commands"]
    # the failed command ran again, the one that had succeeded did not
    assert [(c["index"], c["exitStatus"]) for c in commands] == [(0, 1), (1, 0), (0, 0)]


def test_run_after_a_successful_join_does_nothing(node: Node) -> None:
    loaded, facts = node.configure({}), machine_facts(cloud_config(node.endpoint))
    assert node.run(loaded, facts)[0].ok
    effects = node.host.effects.count
    again, machine = node.run(loaded, facts)
    assert again.outcomes[0].outcome == "up-to-date"
    assert node.host.effects.count == effects
    assert machine.conditions["NodeJoined"].reason == "Joined"


def test_a_node_reset_by_hand_is_joined_again_not_reported_up_to_date(node: Node) -> None:
    loaded, facts = node.configure({}), machine_facts(cloud_config(node.endpoint))
    assert node.run(loaded, facts)[0].ok
    node.host.run(["kubeadm", "reset", "-f"], timeout=60)  # kubelet.conf is gone
    assert not node.joined()
    node.set_world(readyNodes=[])  # its old Node went NotReady with the kubelet stopped
    again, machine = node.run(loaded, facts)
    assert again.ok and again.outcomes[0].outcome == "applied", again.outcomes
    assert machine.conditions["NodeJoined"].reason == "Joined"
    assert node.joined() and node.world["joins"] == ["worker-0", "worker-0"]


def test_a_joined_node_is_not_joined_again_even_without_the_journal(node: Node) -> None:
    loaded, facts = node.configure({}), machine_facts(cloud_config(node.endpoint))
    assert node.run(loaded, facts)[0].ok
    node.file("/var/lib/machine-agent/journal.json").unlink()
    result, machine = node.run(loaded, facts)
    assert result.ok and machine.conditions["NodeJoined"].reason == "Joined"
    assert node.world["joins"] == ["worker-0"]  # kubeadm join ran once, not twice
    # the skip is backed by the workload cluster: the Node is there
    assert machine.conditions["NodeJoined"].message.endswith("; Node worker-0 registered")


def test_a_node_the_kubelet_never_registers_is_not_reported_joined(node: Node) -> None:
    node.set_world(failNext=["node-not-registered"])
    loaded = node.configure({"registrationTimeout": "10s"})
    facts = machine_facts(cloud_config(node.endpoint))
    said = Said()
    result = Orchestrator(loaded, node.host, phases=[JoinPhase()], reporters=[said],
                          machine=facts).run()
    assert not result.ok
    (outcome,) = result.outcomes
    assert outcome.reason == "KubeletNotHealthy"
    assert outcome.message.startswith(
        "kubeadm join succeeded but the kubelet has not registered Node worker-0 on "
        f"https://{node.endpoint} after 10s")
    assert "waiting for the kubelet to register Node worker-0 (0s of 10s)" in said.messages
    assert node.joined() and node.registered() is None  # joined, not half-joined
    # CABPK's sentinel would tell its tooling the node joined: not before the Node is there
    assert not node.file("/run/cluster-api/bootstrap-success.complete").exists()
    # once the kubelet has registered, a run reports the join without joining again
    node.api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-0"}})
    again, machine = node.run(loaded, facts)
    assert again.ok, again.outcomes
    assert machine.conditions["NodeJoined"].message.endswith("; Node worker-0 registered")
    assert node.world["joins"] == ["worker-0"]
    assert node.file("/run/cluster-api/bootstrap-success.complete").read_text() == "success\n"


@pytest.mark.parametrize(("world", "reason", "attempts"), [
    ({"tokens": {"zzzzzz": "0123456789abcdef"}}, Reason.TokenExpired, 1),
    ({"tokens": {"abcdef": "ffffffffffffffff"}}, Reason.TokenInvalid, 1),
    ({"caCertHash": "sha256:" + "00" * 32}, Reason.CACertHashMismatch, 1),
    ({"readyNodes": ["worker-0"]}, Reason.NodeNameConflict, 1),
    ({"failNext": ["preflight:SystemVerification:missing required cgroups: memory"]},
     Reason.PreflightFailed, 1),
    ({"failNext": ["kubelet-unhealthy"] * 3}, Reason.KubeletNotHealthy, 3),
    ({"failNext": ["hang:5"] * 3}, Reason.JoinTimeout, 3),
], ids=lambda v: v if isinstance(v, str) else None)
def test_every_failure_ends_with_its_reason_and_a_clean_node(
        node: Node, world: dict[str, object], reason: Reason, attempts: int) -> None:
    node.set_world(**world)
    # long enough for kubeadm's discovery on a busy machine, shorter than hang:5
    loaded = node.configure({"timeout": "3s"})
    result, machine = node.run(loaded, machine_facts(cloud_config(node.endpoint)))
    joined = machine.conditions["NodeJoined"]
    assert not result.ok
    assert (joined.status, joined.reason) == ("False", str(reason)), joined.message
    assert node.clean(), "a failed join must leave the node clean, never half-joined"
    assert not node.file("/run/cluster-api/bootstrap-success.complete").exists()
    record = json.loads(journal_text(node))["extra"]["join"]["attempts"]
    assert [a["reason"] for a in record] == [str(reason)] * attempts
    assert TOKEN not in journal_text(node) and TOKEN not in joined.message
    if reason is Reason.PreflightFailed:
        assert "SystemVerification: missing required cgroups: memory" in joined.message
    if attempts > 1:
        assert len(node.clock.slept) == attempts - 1
    # every attempt keeps kubeadm's output, a killed one what it printed before
    assert all("[preflight] Running pre-flight checks" in a["outputTail"] for a in record)
    if reason is Reason.JoinTimeout:
        assert record[0]["outputTail"].endswith("[kubelet-start] Starting the kubelet")
        assert "its last line: [kubelet-start] Starting the kubelet" in joined.message


def test_an_unclassified_failure_names_kubeadms_error_not_its_stack_trace_hint(
        node: Node) -> None:
    node.set_world(failNext=["phase-error:kubelet-start:open /var/lib/kubelet/config.yaml: "
                             "read-only file system"])
    _, machine = node.run(node.configure({}), machine_facts(cloud_config(node.endpoint)))
    joined = machine.conditions["NodeJoined"]
    assert joined.reason == "CommandFailed"
    assert ("kubeadm join failed: error execution phase kubelet-start: open /var/lib/kubelet/"
            "config.yaml: read-only file system") in joined.message
    assert "stack trace" not in joined.message


def test_kubeadm_output_is_logged_as_it_comes_with_the_token_redacted(
        node: Node, caplog: pytest.LogCaptureFixture) -> None:
    # a kubeadm that shows its token (as a verbose one may) before the stand-in runs
    verbose = node.root.parent / f"{node.root.name}-bin" / "kubeadm"
    verbose.parent.mkdir()
    standin = node.host.which("kubeadm")
    verbose.write_text(f"#!/bin/sh\n[ \"$1\" = join ] && echo \"[discovery] token {TOKEN}\"\n"
                       f"exec {standin} \"$@\"\n")
    verbose.chmod(0o755)
    node.set_world(failNext=["hang:2"])  # kubeadm pauses 2 s before it writes kubelet.conf
    seen: dict[str, bool] = {}

    class Stamp(logging.Handler):
        """Whether kubeadm had written kubelet.conf when each line was logged."""

        def emit(self, record: logging.LogRecord) -> None:
            seen.setdefault(record.getMessage(),
                            node.file("/etc/kubernetes/kubelet.conf").exists())

    stamp = Stamp()
    logging.getLogger("agent.phases.join").addHandler(stamp)
    caplog.set_level(logging.INFO, logger="agent.phases.join")
    try:
        loaded = node.configure({"kubeadmPath": str(verbose), "timeout": "30s"})
        result, _ = node.run(loaded, machine_facts(cloud_config(node.endpoint)))
    finally:
        logging.getLogger("agent.phases.join").removeHandler(stamp)
    assert result.ok, result.outcomes
    # logged while kubeadm still ran, not once it was done
    assert seen["kubeadm: [kubelet-start] Starting the kubelet"] is False
    assert seen["kubeadm: This node has joined the cluster:"] is True
    assert "kubeadm: [discovery] token ***" in seen
    assert TOKEN not in caplog.text and "0123456789abcdef" not in caplog.text


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed): connects are refused."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port: int = probe.getsockname()[1]
    probe.close()
    return port


def test_an_unreachable_api_server_is_a_temporary_failure_retried_with_backoff(
        node: Node) -> None:
    endpoint = f"127.0.0.1:{closed_port()}"
    loaded = node.configure({}, retry={"attempts": 3})
    result, machine = node.run(loaded, machine_facts(cloud_config(endpoint)))
    joined = machine.conditions["NodeJoined"]
    assert not result.ok and result.temporary  # the daemon starts the bootstrap again
    assert (joined.status, joined.reason) == ("False", "APIServerUnreachable")
    assert f"cannot connect to the API server {endpoint}: Connection refused" in joined.message
    assert len(node.clock.slept) == 2  # retried with backoff, three attempts in all
    assert "joins" not in node.world and node.clean()  # kubeadm never ran


def test_kubeadm_that_cannot_reach_the_api_server_is_retried_by_the_managed_join(
        node: Node) -> None:
    endpoint = f"127.0.0.1:{closed_port()}"
    loaded = node.configure({"nodeRegistration": {
        "ignorePreflightErrors": ["APIServerReachable"]}})  # kubeadm's own discovery fails
    result, machine = node.run(loaded, machine_facts(cloud_config(endpoint)))
    joined = machine.conditions["NodeJoined"]
    assert joined.reason == "APIServerUnreachable" and not result.ok
    assert f"dial tcp {endpoint}: connect: connection refused" in joined.message
    attempts = json.loads(journal_text(node))["extra"]["join"]["attempts"]
    assert [a["reason"] for a in attempts] == ["APIServerUnreachable"] * 3
    assert len(node.clock.slept) == 2 and node.clean()


def test_an_unreachable_api_server_is_listed_with_other_failing_checks(node: Node) -> None:
    node.file("/proc/sys/net/ipv4/ip_forward").write_text("0\n")
    endpoint = f"127.0.0.1:{closed_port()}"
    loaded = node.configure({}, retry={"attempts": 3})
    result, machine = node.run(loaded, machine_facts(cloud_config(endpoint)))
    joined = machine.conditions["NodeJoined"]
    assert not result.temporary and joined.reason == "PreflightFailed"
    assert "2 preflight check(s) failed" in joined.message
    assert "[APIServerReachable] cannot connect" in joined.message
    assert "APIServerReachable alone would be retried" in joined.message
    assert node.clock.slept == []


class Relay:
    """A TCP relay from a loopback port to the API: the control-plane endpoint coming up."""

    def __init__(self, port: int, target: int) -> None:
        self.target = target
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", port))
        self.listener.settimeout(0.1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target), timeout=10)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.listener.close()


def test_a_control_plane_endpoint_that_comes_up_late_is_joined(node: Node) -> None:
    port = closed_port()
    relays: list[Relay] = []

    class ComesUp(NoSleep):
        def sleep(self, seconds: float) -> None:
            super().sleep(seconds)
            if not relays:
                relays.append(Relay(port, node.api.port))

    node.host.clock = clock = ComesUp()
    try:
        loaded = node.configure({}, retry={"attempts": 3})
        result, machine = node.run(loaded, machine_facts(cloud_config(f"127.0.0.1:{port}")))
        assert result.ok, result.outcomes
        assert machine.conditions["NodeJoined"].reason == "Joined"
        assert len(clock.slept) == 1 and node.world["joins"] == ["worker-0"]
    finally:
        for relay in relays:
            relay.close()


@pytest.mark.parametrize(("version", "api_version", "detail"), [
    ("v1.30.4", "v1beta3", "[kubelet-check] The HTTP call equal to 'curl -sSL http://localhost:"
                           "10248/healthz' failed with error: Get \"http://localhost:10248/"
                           "healthz\": dial tcp 127.0.0.1:10248: connect: connection refused."),
    ("v1.31.2", "v1beta4", "The HTTP call equal to 'curl -sSL http://127.0.0.1:10248/healthz' "
                           "returned error: Get \"http://127.0.0.1:10248/healthz\": context "
                           "deadline exceeded"),
])
def test_an_unhealthy_kubelet_is_named_in_the_wording_of_each_kubeadm(
        node: Node, version: str, api_version: str, detail: str) -> None:
    node.set_world(version=version, failNext=["kubelet-unhealthy"])
    loaded = node.configure({"maxAttempts": 1})
    data = cloud_config(node.endpoint, version=api_version)
    _, machine = node.run(loaded, machine_facts(data, version=version))
    joined = machine.conditions["NodeJoined"]
    assert joined.reason == "KubeletNotHealthy", joined.message
    assert f"the kubelet did not become healthy: {detail} (" in joined.message, joined.message
    assert node.clean()


def test_a_file_written_again_for_a_retry_keeps_its_owner(node: Node) -> None:
    node.file("/etc").mkdir(exist_ok=True)
    node.file("/etc/passwd").write_text("root:x:0:0::/root:/bin/sh\n"
                                        "kube:x:1234:1235::/:/usr/sbin/nologin\n")
    node.file("/etc/group").write_text("root:x:0:\nkube:x:1235:\n")
    data = cloud_config(node.endpoint).replace("owner: root:root", "owner: kube:kube", 1)
    config = node.file("/run/kubeadm/kubeadm-join-config.yaml")
    node.set_world(failNext=["kubelet-unhealthy"])
    loaded, facts = node.configure({"maxAttempts": 1}), machine_facts(data)
    assert not node.run(loaded, facts)[0].ok
    assert (config.stat().st_uid, config.stat().st_gid) == (1234, 1235)
    config.unlink()  # a reboot empties /run
    result, _ = node.run(loaded, facts)  # the write step is journaled: the join rewrites it
    assert result.ok, result.outcomes
    assert (config.stat().st_uid, config.stat().st_gid) == (1234, 1235)
    assert config.stat().st_mode & 0o777 == 0o640


def test_a_failed_run_then_run_resets_and_retries_within_the_limit(node: Node) -> None:
    node.set_world(failNext=["kubelet-unhealthy"] * 3)
    loaded = node.configure({"maxAttempts": 2})
    facts = machine_facts(cloud_config(node.endpoint))
    _, machine = node.run(loaded, facts)
    assert machine.conditions["NodeJoined"].reason == "KubeletNotHealthy"
    assert "failed 2 time(s)" in machine.conditions["NodeJoined"].message
    # a crash of an earlier attempt left kubeadm's files behind
    node.file("/etc/kubernetes/pki").mkdir(parents=True, exist_ok=True)
    node.file("/etc/kubernetes/pki/ca.crt").write_text("left over\n")
    second, machine = node.run(loaded, facts)
    assert second.ok and machine.conditions["NodeJoined"].reason == "Joined"
    attempts = json.loads(journal_text(node))["extra"]["join"]["attempts"]
    assert [(a["outcome"], a["resetBefore"]) for a in attempts] == [
        ("failed", False), ("failed", False), ("failed", True), ("joined", False)]


def _context(node: Node, facts_token: str, reload_token: str) -> PhaseContext:
    loaded = node.configure({})
    reloads: list[str] = []

    def reload() -> MachineFacts:
        reloads.append(reload_token)
        return machine_facts(cloud_config(node.endpoint, token=reload_token))

    ctx = PhaseContext(loaded.config, node.host, Journal.load(node.host), {},
                       lambda message: None, logging.getLogger("test"),
                       machine_facts(cloud_config(node.endpoint, token=facts_token)),
                       reload_machine=reload)
    ctx.journal.start("join", "sha256:test")
    return ctx


def test_expired_token_is_replaced_by_a_fresh_one_from_the_bootstrap_data(node: Node) -> None:
    node.set_world(tokens={"ghijkl": "0123456789ghijkl"})  # the first token has expired
    ctx = _context(node, TOKEN, FRESH_TOKEN)
    phase = JoinPhase()
    phase.apply(ctx, phase.plan(ctx))
    result = phase.verify(ctx, phase.plan(ctx))
    assert result.node == "worker-0" and node.joined()
    attempts = ctx.journal.section(JoinRecord).attempts
    assert [(a.outcome, a.reason) for a in attempts] == [
        ("failed", "TokenExpired"), ("joined", None)]
    assert FRESH_TOKEN in node.file("/run/kubeadm/kubeadm-join-config.yaml").read_text()


def test_a_dead_token_is_never_retried(node: Node) -> None:
    node.set_world(tokens={})
    ctx = _context(node, TOKEN, TOKEN)  # the bootstrap data still has the same token
    phase = JoinPhase()
    with pytest.raises(AgentError) as info:
        phase.apply(ctx, phase.plan(ctx))
    assert info.value.reason is Reason.TokenExpired and not info.value.temporary
    assert "still has the same token" in info.value.message
    assert len(ctx.journal.section(JoinRecord).attempts) == 1 and node.clean()


def test_agent_preflight_lists_every_failing_check_and_does_not_run_kubeadm(
        node: Node) -> None:
    node.file("/proc/swaps").write_text("Filename\tType\tSize\tUsed\tPriority\n"
                                        "/swap.img\tfile\t1024\t0\t-2\n")
    node.file("/proc/sys/net/ipv4/ip_forward").write_text("0\n")
    node.file("/proc/net/tcp6").write_text("  sl  local_address rem_address   st\n"
                                           "   0: 00000000000000000000000000000000:280A "
                                           "00000000000000000000000000000000:0000 0A\n")
    node.file("/var/run/containerd/containerd.sock").unlink()
    node.set_world(version="v1.27.3")
    loaded = node.configure({}, skipPhases=[])  # and the time phase never ran
    _, machine = node.run(loaded, machine_facts(cloud_config(node.endpoint)))
    message = machine.conditions["NodeJoined"].message
    assert machine.conditions["NodeJoined"].reason == "PreflightFailed"
    for expected in ("[CRI] container runtime socket /var/run/containerd/containerd.sock "
                     "does not exist", "[KubeadmVersion] kubeadm vv1.27.3",
                     "[KubeletVersion]", "[Swap] swap is on (/swap.img)",
                     "[FileContent--proc-sys-net-ipv4-ip_forward] /proc/sys/net/ipv4/"
                     "ip_forward contents are not set to 1",
                     "[Port-10250] Port 10250 is in use", "[TimeSynchronized]"):
        assert expected.replace("vv", "v") in message, message
    assert "fix: run `swapoff -a`" in message
    assert "joins" not in node.world and node.clean()


def test_ignored_preflight_checks_only_warn(node: Node) -> None:
    node.file("/proc/sys/net/ipv4/ip_forward").write_text("0\n")
    loaded = node.configure({"nodeRegistration": {
        "ignorePreflightErrors": ["FileContent--proc-sys-net-ipv4-ip_forward"]}})
    result, _ = node.run(loaded, machine_facts(cloud_config(node.endpoint)))
    assert result.ok and node.joined()


def test_run_only_join_from_a_local_bootstrap_data_file_via_the_cli(
        node: Node, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from agent.cli import main

    monkeypatch.setenv("PATH", node.host.env["PATH"])
    node.host.write_file("/etc/machine-agent/bootstrap-data",
                         cloud_config(node.endpoint, version="v1beta3"))
    node.configure({"bootstrapDataFile": "/etc/machine-agent/bootstrap-data",
                    "kubernetesVersion": "v1.30.4",
                    "nodeRegistration": {"name": "worker-7"}})
    node.set_world(version="v1.30.4")
    assert main(["--root", str(node.root), "run", "--only", "join"]) == 0
    assert "join     applied" in capsys.readouterr().out
    assert node.joined() and node.world["joins"] == ["worker-7"]
    assert main(["--root", str(node.root), "run", "--only", "join"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_plan_shows_the_join_configuration_with_the_token_masked(
        node: Node, capsys: pytest.CaptureFixture[str]) -> None:
    from agent.cli import main

    node.configure({"source": "config", "kubernetesVersion": "v1.31.0",
                    "discovery": {"bootstrapToken": {
                        "token": TOKEN, "apiServerEndpoint": node.endpoint,
                        "caCertHashes": ["sha256:" + "5e" * 32]}},
                    "nodeRegistration": {"name": "worker-3",
                                         "kubeletExtraArgs": {"node-ip": "192.0.2.30"}}})
    assert main(["--root", str(node.root), "plan", "--only", "join"]) == 0
    out = capsys.readouterr().out
    assert "kubeadm.k8s.io/v1beta4 JoinConfiguration from spec.join" in out
    assert "apiVersion: kubeadm.k8s.io/v1beta4" in out
    assert 'token: "***"' in out and "- name: \"node-ip\"" in out
    assert TOKEN not in out and "0123456789abcdef" not in out
    assert not node.file("/run/kubeadm").exists()  # plan changed nothing


def _file_discovery(node: Node, ca_pem: str) -> dict[str, object]:
    """spec.join for discovery by a kubeconfig file with `ca_pem` as the cluster's CA."""
    import base64

    import yaml

    node.host.write_file("/etc/kubernetes/discovery.conf", yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "join",
        "clusters": [{"name": "other", "cluster": {"server": "https://192.0.2.1:6443"}},
                     {"name": "workload", "cluster": {
                         "server": f"https://{node.endpoint}",
                         "certificate-authority-data": base64.b64encode(
                             ca_pem.encode()).decode()}}],
        "contexts": [{"name": "join", "context": {"cluster": "workload", "user": "join"}}],
        "users": [{"name": "join", "user": {}}]}), mode=0o600)
    return {"source": "config", "kubernetesVersion": "v1.31.2",
            "discovery": {"file": {"kubeConfigPath": "/etc/kubernetes/discovery.conf",
                                   "tlsBootstrapToken": TOKEN}},
            "nodeRegistration": {"name": "worker-0"}}


def test_joins_by_a_discovery_kubeconfig_file(node: Node) -> None:
    loaded = node.configure(_file_discovery(node, node.api.ca_path.read_text()))
    result, machine = node.run(loaded)
    joined = machine.conditions["NodeJoined"]
    assert result.ok, result.outcomes
    # the server of the file's current context, not its other cluster
    assert joined.message == (f"Node worker-0 joined https://{node.endpoint} (Kubernetes "
                              "v1.31.2); Node worker-0 registered")
    assert node.joined() and node.world["joins"] == ["worker-0"]
    assert TOKEN not in journal_text(node) and TOKEN not in joined.message


def test_a_discovery_file_with_another_ca_is_refused_as_kubeadm_refuses_it(
        node: Node, tmp_path_factory: pytest.TempPathFactory) -> None:
    from machine_agent_sandbox.apiserver.auth import generate_tls

    other = generate_tls(tmp_path_factory.mktemp("other-ca"), [])
    loaded = node.configure({**_file_discovery(node, other.ca_pem), "maxAttempts": 1})
    result, machine = node.run(loaded)
    joined = machine.conditions["NodeJoined"]
    # the server answered with a certificate the join does not trust: not a generic
    # command failure, nor an unreachable server
    assert not result.ok and joined.reason == "APIServerUntrusted"
    assert ("couldn't validate the identity of the API Server: Abort reading the cluster-info "
            "ConfigMap after timeout of 5m0s") in joined.message
    assert "x509: certificate signed by unknown authority" in joined.message
    assert "joins" not in node.world and node.clean()


def test_a_control_plane_certificate_key_never_reaches_plan_logs_or_status(
        node: Node, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    from agent.cli import main

    key = secrets.token_hex(32)  # unique: the redactor is process-wide
    # a cluster whose first control plane uploaded its certificates with this key
    node.set_world(clusterConfiguration={"controlPlaneEndpoint": node.endpoint},
                   uploadedCerts={"key": key})
    node.host.write_file("/etc/machine-agent/bootstrap-data",
                         cloud_config(node.endpoint, certificate_key=key))
    loaded = node.configure({"bootstrapDataFile": "/etc/machine-agent/bootstrap-data",
                             "kubernetesVersion": "v1.31.2",
                             "nodeRegistration": {"name": "worker-0"}})
    assert main(["--root", str(node.root), "plan", "--only", "join"]) == 0
    out = capsys.readouterr().out
    assert "certificateKey: ***" in out  # the plan shows the file, the key masked
    caplog.set_level(logging.DEBUG)
    result, machine = node.run(loaded)
    assert result.ok, result.outcomes
    assert key in node.file("/run/kubeadm/kubeadm-join-config.yaml").read_text()
    for text in (out, caplog.text, journal_text(node),
                 json.dumps([c.message for c in machine.conditions.values()])):
        assert key not in text


@pytest.mark.parametrize(("machine_version", "api_version"), [
    ("v1.30.6", "v1beta3"), ("v1.31.0", "v1beta4")])
def test_the_join_configuration_version_follows_the_machines_kubernetes_version(
        node: Node, machine_version: str, api_version: str) -> None:
    loaded = node.configure({"source": "config", "kubernetesVersion": "v1.31.0",
                             "discovery": {"bootstrapToken": {
                                 "token": TOKEN, "apiServerEndpoint": node.endpoint,
                                 "caCertHashes": ["sha256:" + "5e" * 32]}}})
    facts = MachineFacts("default", "worker-0", "uid-0", "demo",
                         kubernetes_version=machine_version)  # wins over the config's
    (plan,) = Orchestrator(loaded, node.host, phases=[JoinPhase()], machine=facts).plan(
        show_secrets=True)  # the file's contents, as `plan --show-secrets` shows them
    assert (f"kubeadm.k8s.io/{api_version} JoinConfiguration from spec.join, Kubernetes "
            f"{machine_version}") in plan.notes[0]
    (write,) = [c for c in plan.changes if c.summary.startswith(
        "create /run/kubeadm/kubeadm-join-config.yaml")]
    assert f"+apiVersion: kubeadm.k8s.io/{api_version}\n" in write.diff
    node.set_world(version=machine_version)  # the kubeadm of that release takes it
    result, _ = node.run(loaded, facts)
    assert result.ok, result.outcomes
    config = node.file("/run/kubeadm/kubeadm-join-config.yaml").read_text()
    assert f"apiVersion: kubeadm.k8s.io/{api_version}\n" in config


def test_a_newline_in_a_taint_or_kubelet_arg_is_refused(node: Node) -> None:
    from agent.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        node.configure({"nodeRegistration": {
            "kubeletExtraArgs": {"node-labels": "a=b\n--evil=1"},
            "taints": [{"key": "dedicated", "value": "gpu\nx", "effect": "NoSchedule"}]}})
    shown = str(info.value)
    assert "spec.join.nodeRegistration.kubeletExtraArgs" in shown
    assert "spec.join.nodeRegistration.taints[0].value" in shown




def test_kubeadm_refuses_a_second_join_with_its_preflight_message(node: Node) -> None:
    import yaml

    data = yaml.safe_load(cloud_config(node.endpoint).split("\n", 1)[1])
    text = data["write_files"][0]["content"].replace("{{ ds.meta_data.local_hostname }}",
                                                     "worker-0")
    node.host.write_file("/run/kubeadm/join.yaml", text)
    argv = ["kubeadm", "join", "--config", "/run/kubeadm/join.yaml"]
    assert node.host.run(argv, check=False).ok
    again = node.host.run(argv, check=False)
    assert not again.ok
    assert ("[ERROR FileAvailable--etc-kubernetes-kubelet.conf]: /etc/kubernetes/kubelet.conf "
            "already exists") in again.stderr
    assert node.host.run(["kubeadm", "reset", "-f"]).ok and node.clean()


def test_kubeadm_refuses_a_ca_certificate_present_only_on_a_worker_join(node: Node) -> None:
    """As RunJoinNodeChecks: a control-plane join's bootstrap data writes the cluster's CA
    files before kubeadm runs, so only a worker join finds pki/ca.crt in its way."""
    import yaml

    def join_file(certificate_key: str | None) -> list[str]:
        data = yaml.safe_load(cloud_config(node.endpoint, certificate_key=certificate_key)
                              .split("\n", 1)[1])
        text = data["write_files"][0]["content"].replace(
            "{{ ds.meta_data.local_hostname }}", "worker-0")
        node.host.write_file("/run/kubeadm/join.yaml", text)
        return ["kubeadm", "join", "--config", "/run/kubeadm/join.yaml"]

    node.host.write_file("/etc/kubernetes/pki/ca.crt", "from the bootstrap data\n")
    node.set_world(clusterConfiguration={"controlPlaneEndpoint": node.endpoint},
                   uploadedCerts={"key": "8f" * 32})
    worker = node.host.run(join_file(None), check=False)
    assert not worker.ok
    assert ("[ERROR FileAvailable--etc-kubernetes-pki-ca.crt]: /etc/kubernetes/pki/ca.crt "
            "already exists") in worker.stderr
    control_plane = node.host.run(join_file("8f" * 32), check=False)
    assert "FileAvailable" not in control_plane.stderr, control_plane.stderr
    assert control_plane.ok, control_plane.stderr
    assert node.host.run(["kubeadm", "reset", "-f"]).ok
