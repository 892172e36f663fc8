"""A bootstrap that fails for a reason that may pass (an IPAM backend or the API down for
longer than a phase's own retries) is tried again by the daemon, with backoff, until it
succeeds: a node is never left unbootstrapped until someone restarts the service."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from agent.daemon import service
from agent.daemon.service import Daemon, Stop
from agent.host import Host
from agent.report import SUMMARY, Condition
from agent.retry import Backoff
from tests.phases_for_tests import FilesPhase

CONFIG = """\
apiVersion: machine-agent.io/v1alpha1
kind: AgentConfig
spec:
  retry: {attempts: 2, initialDelay: 10ms, maxDelay: 10ms}
"""


class Summaries:
    """A reporter beside the daemon's own: every summary it publishes, in order (no
    polling, so a short-lived failure cannot be missed); stops the daemon once True."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.seen: list[str] = []

    def publish(self, conditions: list[Condition], final: bool) -> None:
        summary = next(c for c in conditions if c.type == SUMMARY)
        text = f"{summary.status} {summary.reason}"
        if not self.seen or self.seen[-1] != text:
            self.seen.append(text)
        if summary.status == "True":
            self.daemon.events.put(Stop(signal.SIGTERM))


def test_a_temporary_failure_is_tried_again_until_the_bootstrap_succeeds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = Host(tmp_path / "root")
    host.write_file("/etc/machine-agent/config.yaml", CONFIG)
    monkeypatch.setattr(service, "START_BACKOFF", Backoff(base=0.05, cap=0.05, attempts=0))
    # Two attempts per run: the first run fails twice, the second once, then succeeds.
    phase = FilesPhase(fail_times=3)
    daemon = Daemon(host, phases=[phase])
    summaries = Summaries(daemon)
    daemon.reporters.append(summaries)
    # A bound on the test: stop anyway after 20 s (the daemon then returns at once).
    guard = threading.Timer(20, daemon.events.put, (Stop(signal.SIGTERM),))
    guard.start()
    try:
        assert daemon.run() == 0
    finally:
        guard.cancel()
    seen = summaries.seen
    assert phase.fail_times == 0
    assert seen[-1] == "True Bootstrapped", seen
    assert "False IPAMUnavailable" in seen, seen
    # Resumed, not repeated: the non-idempotent step ran once over both runs.
    assert host.read_text("/var/log/steps.log") == "appended once\n"


def test_a_change_whose_bootstrap_failed_for_now_is_reported_applied_once_it_completes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = Host(tmp_path / "root")
    host.write_file("/etc/machine-agent/config.yaml", CONFIG)
    monkeypatch.setattr(service, "START_BACKOFF", Backoff(base=60, cap=60, attempts=0))
    daemon = Daemon(host, phases=[FilesPhase(fail_times=2)])  # the first run fails
    daemon._bootstrap("configmap fleet/worker-0-agent")  # a change on an unjoined node
    assert daemon.orchestrator is not None
    applied = daemon.orchestrator.conditions.get("AgentConfigApplied")
    assert (applied.status, applied.reason) == ("False", "IPAMUnavailable")

    daemon._bootstrap()  # as StartAgain runs it
    applied = daemon.orchestrator.conditions.get("AgentConfigApplied")
    assert (applied.status, applied.reason) == ("True", "Reconfigured")
    assert applied.message.startswith(
        "configmap fleet/worker-0-agent: the bootstrap ran again with it and completed")
