"""A changed AgentConfig on a running node (agent/daemon/reconfigure.py), seen through
what the Machine is told: a change that works is applied; one that fails is rolled back,
the node keeps serving with the previous configuration, and the readiness gate
(NodeBootstrapped) never reads False on the way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.config import AgentConfig, load_config
from agent.daemon.reconfigure import reconfigure
from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.kube.facts import MachineFacts
from agent.kube.machine import MachineView
from agent.kube.machine_config import ManagementSource
from agent.phases.base import Phase, PhaseContext, PhasePlan, PhaseResult, file_change
from agent.report import Condition
from agent.session import Session

CONF = "/etc/demo/time.conf"
REFUSED = "refused.example.test"


class TimePhase(Phase):
    """Writes the configured servers; a server named `refused.example.test` fails the
    proof, as an unreachable NTP server does."""

    name = "time"
    condition = "TimeSynchronized"
    success = Reason.TimeSynchronized

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        plan = PhasePlan(self.name)
        change = file_change(ctx.host, CONF, "".join(
            f"server {s.host}\n" for s in ctx.config.spec.time.servers))
        if change:
            plan.changes.append(change)
        return plan

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> PhaseResult:
        if any(s.host == REFUSED for s in ctx.config.spec.time.servers):
            raise PermanentError(f"no answer from {REFUSED}", reason=Reason.TimeNotSynchronized)
        return PhaseResult()

    def inputs(self, config: AgentConfig) -> Any:
        return [s.host for s in config.spec.time.servers]


class Recorder:
    """The Machine as the reporters would tell it: every publication, in order."""

    def __init__(self) -> None:
        self.published: list[dict[str, Condition]] = []

    def publish(self, conditions: list[Condition], final: bool) -> None:
        self.published.append({c.type: c for c in conditions})


def source(*servers: str) -> ManagementSource:
    listed = "".join(f"      - host: {s}\n" for s in servers)
    return ManagementSource("configmap default/agent", "apiVersion: machine-agent.io/v1alpha1\n"
                            "kind: AgentConfig\nspec:\n  lifecycle:\n"
                            f"    reconfigure: [time]\n  time:\n    servers:\n{listed}")


def running(host: Host, recorder: Recorder) -> tuple[Session, Any, Any]:
    first = source("ntp-a.example.test")
    view = MachineView(MachineFacts("default", "worker-0", "uid-0", "c1"), "v1beta2", 1,
                       first)
    session = Session(load_config(host, [first]), view)

    def orchestrator_for(s: Session) -> Any:
        orchestrator = s.orchestrator(host, phases=[TimePhase()])
        orchestrator.reporters.append(recorder)
        return orchestrator

    boot = orchestrator_for(session)
    assert not any(o.outcome == "failed" for o in boot.run().outcomes)
    return session, boot, orchestrator_for


def test_a_working_change_is_applied_and_reported(tmp_path: Path) -> None:
    host, recorder = Host(tmp_path), Recorder()
    session, boot, orchestrator_for = running(host, recorder)
    recorder.published.clear()

    session, _ = reconfigure(host, session, source("ntp-b.example.test"),
                               orchestrator_for, boot)

    assert (tmp_path / CONF.lstrip("/")).read_text() == "server ntp-b.example.test\n"
    last = recorder.published[-1]
    assert (last["AgentConfigApplied"].status, last["AgentConfigApplied"].reason) == (
        "True", "Reconfigured")
    assert last["NodeBootstrapped"].status == "True"
    assert session.loaded.config.spec.time.servers[0].host == "ntp-b.example.test"


def test_a_failing_change_is_rolled_back_without_the_readiness_gate_ever_flapping(
        tmp_path: Path) -> None:
    host, recorder = Host(tmp_path), Recorder()
    session, boot, orchestrator_for = running(host, recorder)
    recorder.published.clear()

    kept, now = reconfigure(host, session, source(REFUSED), orchestrator_for, boot)

    # The previous configuration is in force again, on the node and in the session.
    assert (tmp_path / CONF.lstrip("/")).read_text() == "server ntp-a.example.test\n"
    assert kept.loaded.config.spec.time.servers[0].host == "ntp-a.example.test"
    assert recorder.published, "the outcome was never reported"
    assert all(p["NodeBootstrapped"].status == "True" for p in recorder.published), [
        (p["NodeBootstrapped"].status, p["NodeBootstrapped"].message)
        for p in recorder.published]
    last = recorder.published[-1]
    applied = last["AgentConfigApplied"]
    assert (applied.status, applied.reason) == ("False", "TimeNotSynchronized")
    assert f"time: no answer from {REFUSED}" in applied.message
    synced = last["TimeSynchronized"]
    assert synced.status == "True"  # it runs, with the previous servers
    assert "refused and rolled back" in synced.message

    # The same refused content is not tried again until it changes.
    again, _ = reconfigure(host, kept, source(REFUSED), orchestrator_for, now)
    assert again is kept
