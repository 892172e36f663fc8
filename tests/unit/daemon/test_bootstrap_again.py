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
from agent.report import SUMMARY, read_status
from agent.retry import Backoff
from tests.phases_for_tests import FilesPhase

CONFIG = """\
apiVersion: machine-agent.io/v1alpha1
kind: AgentConfig
spec:
  retry: {attempts: 2, initialDelay: 10ms, maxDelay: 10ms}
"""


def summaries(host: Host, seen: list[str], stop: threading.Event,
              daemon: Daemon) -> None:
    """Record each published summary until it is True, then stop the daemon (bounded)."""
    for _ in range(400):
        last = read_status(host)
        if last is not None:
            summary = next(c for c in last[0] if c.type == SUMMARY)
            text = f"{summary.status} {summary.reason}"
            if not seen or seen[-1] != text:
                seen.append(text)
            if summary.status == "True":
                break
        if stop.wait(0.025):
            break
    daemon.events.put(Stop(signal.SIGTERM))


def test_a_temporary_failure_is_tried_again_until_the_bootstrap_succeeds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = Host(tmp_path / "root")
    host.write_file("/etc/machine-agent/config.yaml", CONFIG)
    monkeypatch.setattr(service, "START_BACKOFF", Backoff(base=0.05, cap=0.05, attempts=0))
    # Two attempts per run: the first run fails twice, the second once, then succeeds.
    phase = FilesPhase(fail_times=3)
    daemon = Daemon(host, phases=[phase])
    seen: list[str] = []
    stop = threading.Event()
    watcher = threading.Thread(target=summaries, args=(host, seen, stop, daemon))
    watcher.start()
    try:
        assert daemon.run() == 0
    finally:
        stop.set()
        watcher.join(timeout=15)
    assert phase.fail_times == 0
    assert seen[-1] == "True Bootstrapped", seen
    assert "False IPAMUnavailable" in seen, seen
    # Resumed, not repeated: the non-idempotent step ran once over both runs.
    assert host.read_text("/var/log/steps.log") == "appended once\n"
