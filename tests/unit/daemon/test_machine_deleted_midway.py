"""A Machine deleted while its node bootstraps: the first report that finds it gone (404
on its status) stops the run. No more retries, no later phase, no bootstrap tried again
by the daemon: nothing waits for this node any more."""

from __future__ import annotations

from pathlib import Path

from agent.config import load_config
from agent.config.sources import FileSource
from agent.host import Host
from agent.kube.client import Client
from agent.kube.facts import MachineFacts
from agent.kube.kubeconfig import Credentials
from agent.kube.machine import MachineView
from agent.kube.reporter import MachineReporter
from agent.orchestrator import MACHINE_DELETED, Orchestrator
from agent.retry import Backoff
from agent.state import Journal
from tests.phases_for_tests import FilesPhase
from tests.unit.kube.fake_session import FakeSession, response, status

CONFIG = """\
apiVersion: machine-agent.io/v1alpha1
kind: AgentConfig
spec:
  retry: {attempts: 6, initialDelay: 10ms, maxDelay: 10ms}
"""


def test_a_run_stops_when_a_report_finds_the_machine_deleted(tmp_path: Path) -> None:
    host = Host(tmp_path)
    host.write_file("/etc/machine-agent/config.yaml", CONFIG)
    loaded = load_config(host, [FileSource("/etc/machine-agent/config.yaml")])
    session = FakeSession([response(404, status(404, "NotFound",
                                                'machines "worker-0" not found'))])
    client = Client(Credentials("https://mgmt:6443"), backoff=Backoff(0.01, 0.01, 1),
                    sleep=lambda s: None, session=session)  # type: ignore[arg-type]
    facts = MachineFacts("default", "worker-0", "uid-1", "c1")
    reporter = MachineReporter(client, MachineView(facts, "v1beta2", 1, None),
                               Journal(host), host=host, interval=0, final_attempts=1)
    phase = FilesPhase(fail_times=5)  # would succeed at its sixth attempt
    result = Orchestrator(loaded, host, phases=[phase], reporters=[reporter],
                          machine=facts).run()
    assert reporter.machine_deleted
    assert phase.fail_times == 4  # one attempt, no retry for a Machine that is gone
    (outcome,) = result.outcomes
    assert (outcome.outcome, outcome.reason) == ("failed", "MachineNotFound")
    assert MACHINE_DELETED in outcome.message
    assert not result.temporary  # the daemon does not try the bootstrap again
    assert len(session.sent) == 1  # and no more reports to a Machine that is gone
