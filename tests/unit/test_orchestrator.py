"""The orchestrator and journal: run, re-run, retry, fail, plan — as a user sees them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.config import load_config
from agent.errors import PermanentError, Reason
from agent.host import Clock, Host
from agent.orchestrator import Orchestrator
from agent.phases.base import Phase, PhaseContext, PhasePlan
from agent.report import SUMMARY, Condition, LocalStatus, read_status
from agent.state import Journal
from tests.phases_for_tests import LOG, FilesPhase

EXAMPLE = str(Path(__file__).parents[2] / "examples" / "local-only.yaml")


class NoSleep(Clock):
    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def without_join(root: Path) -> None:
    """The example node has no bootstrap data to join with; these tests are about the
    orchestrator, so the join phase is skipped by configuration."""
    drop_in = root / "etc/machine-agent/config.d/no-join.yaml"
    drop_in.parent.mkdir(parents=True)
    drop_in.write_text("apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"
                       "spec: {skipPhases: [join]}\n")


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_second_run_applies_nothing_and_says_so(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(tmp_path), "run", "--skip", "join", "-c", EXAMPLE]) == 0
    first = capsys.readouterr().out
    assert "network  applied" in first
    assert main(["--root", str(tmp_path), "run", "--skip", "join", "-c", EXAMPLE]) == 0
    second = capsys.readouterr().out
    assert "nothing to do: every phase is up to date" in second
    assert second.count("up to date, nothing to apply") == 3


def test_files_are_written_once_and_rerun_changes_nothing(tmp_path: Path) -> None:
    host = Host(tmp_path)
    loaded = load_config(host, [])
    result = Orchestrator(loaded, host, phases=[FilesPhase()]).run()
    assert result.ok and result.outcomes[0].changes == 3
    assert (tmp_path / "etc/demo/second.conf").stat().st_mode & 0o777 == 0o600
    before = snapshot(tmp_path)
    effects = host.effects.count
    again = Orchestrator(loaded, host, phases=[FilesPhase()]).run()
    assert again.outcomes[0].outcome == "up-to-date"
    assert host.effects.count == effects  # not a single write
    assert snapshot(tmp_path) == before
    assert (tmp_path / LOG.lstrip("/")).read_text() == "appended once\n"


def test_temporary_failure_is_retried_with_jittered_backoff(tmp_path: Path) -> None:
    clock = NoSleep()
    host = Host(tmp_path, clock=clock)
    result = Orchestrator(load_config(host, []), host, phases=[FilesPhase(fail_times=2)]).run()
    assert result.ok
    assert len(clock.slept) == 2 and all(0 <= s <= 2 for s in clock.slept)
    # the retried attempts did not append twice: the journal remembered the step
    assert (tmp_path / LOG.lstrip("/")).read_text() == "appended once\n"
    # every attempt counts, as the log's ATTEMPT field numbers them (status --long reads it)
    assert Journal.load(host).phases["network"].attempts == 3


class Broken(Phase):
    name = "time"
    condition = "TimeSynchronized"
    success = Reason.TimeSynchronized

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        raise PermanentError("servers 192.0.2.123 did not answer",
                             reason=Reason.TimeNotSynchronized)


class Later(Phase):
    name = "join"
    condition = "NodeJoined"
    success = Reason.Joined


def test_permanent_failure_stops_and_reports_why(tmp_path: Path) -> None:
    host = Host(tmp_path)
    orch = Orchestrator(load_config(host, []), host, phases=[FilesPhase(), Broken(), Later()],
                        reporters=[LocalStatus(host)])
    result = orch.run()
    assert result.exit_code == 1
    assert [o.outcome for o in result.outcomes] == ["applied", "failed", "pending"]
    status = read_status(host)
    assert status is not None
    conditions, final = status
    by_type = {c.type: c for c in conditions}
    assert final
    assert by_type["TimeSynchronized"].status == "False"
    assert by_type["TimeSynchronized"].reason == "TimeNotSynchronized"
    assert "192.0.2.123" in by_type["TimeSynchronized"].message
    assert by_type["NodeJoined"].reason == "Pending"
    assert "waiting for the time phase" in by_type["NodeJoined"].message
    assert by_type["NodeBootstrapped"].status == "False"
    journal = json.loads((tmp_path / "var/lib/machine-agent/journal.json").read_text())
    assert journal["phases"]["time"]["state"] == "failed"
    assert (tmp_path / "var/lib/machine-agent").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "var/lib/machine-agent/journal.json").stat().st_mode & 0o777 == 0o600


def test_transition_time_moves_only_when_status_changes(tmp_path: Path) -> None:
    host = Host(tmp_path)
    loaded = load_config(host, [])
    Orchestrator(loaded, host, phases=[FilesPhase()], reporters=[LocalStatus(host)]).run()
    first = {c.type: c for c in read_status(host)[0]}  # type: ignore[index]
    Orchestrator(loaded, host, phases=[FilesPhase()], reporters=[LocalStatus(host)]).run()
    second = {c.type: c for c in read_status(host)[0]}  # type: ignore[index]
    assert first["NetworkReady"].last_transition_time == \
        second["NetworkReady"].last_transition_time


def test_plan_shows_diffs_and_changes_nothing(tmp_path: Path) -> None:
    host = Host(tmp_path)
    (tmp_path / "etc/demo").mkdir(parents=True)
    (tmp_path / "etc/demo/first.conf").write_text("first = 0\n")
    before = snapshot(tmp_path)
    plans = Orchestrator(load_config(host, []), host, phases=[FilesPhase()]).plan()
    assert snapshot(tmp_path) == before
    assert host.effects.count == 0
    summaries = [c.summary for c in plans[0].changes]
    assert summaries == ["update /etc/demo/first.conf", f"append a line to {LOG}",
                         "create /etc/demo/second.conf"]
    assert "-first = 0\n+first = 1" in plans[0].changes[0].diff


def test_only_and_skip_select_phases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    without_join(tmp_path)
    assert main(["--root", str(tmp_path), "run", "--only", "time", "-c", EXAMPLE]) == 0
    out = capsys.readouterr().out
    assert out.startswith("time ") and "network" not in out
    assert main(["--root", str(tmp_path), "run", "--skip", "network", "--skip", "time",
                 "-c", EXAMPLE]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("join ")
    with pytest.raises(SystemExit) as info:
        main(["run", "--only", "netwrok"])
    assert info.value.code == 2


def test_status_before_and_after_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    without_join(tmp_path)
    assert main(["--root", str(tmp_path), "status"]) == 0
    assert "no run recorded on this boot yet" in capsys.readouterr().out
    main(["--root", str(tmp_path), "run", "-c", EXAMPLE])
    capsys.readouterr()
    assert main(["--root", str(tmp_path), "status", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["final"] is True
    summary = next(c for c in doc["conditions"] if c["type"] == "NodeBootstrapped")
    assert summary["status"] == "True" and summary["reason"] == "Bootstrapped"
    assert set(doc["phases"]) == {"network", "time", "cni"}  # join: skipped, never run


def test_unreadable_journal_is_a_clear_error(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "var/lib/machine-agent"
    state.mkdir(parents=True)
    (state / "journal.json").write_text("{not json")
    assert main(["--root", str(tmp_path), "run", "-c", EXAMPLE]) == 1
    err = capsys.readouterr().err
    assert "journal /var/lib/machine-agent/journal.json is unreadable" in err
    assert "move it aside" in err


def test_a_journal_save_with_nothing_changed_writes_nothing(tmp_path: Path) -> None:
    from agent.state import JOURNAL

    host = Host(tmp_path)
    journal = Journal(host)
    journal.start("network", "sha256:1")
    written = host.effects.recent.count(f"write {JOURNAL}")
    journal.save()
    Journal.load(host).save()  # as read: the same content
    assert host.effects.recent.count(f"write {JOURNAL}") == written == 1
    journal.step_done("network", "live")
    assert host.effects.recent.count(f"write {JOURNAL}") == 2
    assert Journal.load(host).phases["network"].steps == ["live"]


def test_plan_leaves_out_the_phases_the_configuration_skips(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`run` skips them, so `plan` has nothing to say of them: join, skipped on a node
    without bootstrap data, is not planned (it failed the plan for want of a Kubernetes
    version)."""
    without_join(tmp_path)
    assert main(["--root", str(tmp_path), "plan", "-c", EXAMPLE]) == 0
    planned = [line.split(":")[0] for line in capsys.readouterr().out.splitlines()
               if not line.startswith(" ")]
    assert "join" not in planned and "network" in planned


class TimePhase(FilesPhase):
    """A second phase after network (its own name and condition, the same files)."""

    name = "time"
    condition = "TimeSynchronized"
    success = Reason.TimeSynchronized


def test_the_summary_says_which_phase_runs_and_which_are_done(tmp_path: Path) -> None:
    """NodeBootstrapped (CAPI shows it in the Machine's Ready message) moves with the run:
    Unknown naming the phase that runs, then True; never "not started" once it began."""
    host = Host(tmp_path)
    seen: list[tuple[str, str, str]] = []

    class Recorder:
        def publish(self, conditions: list[Condition], final: bool) -> None:
            summary = next(c for c in conditions if c.type == SUMMARY)
            seen.append((summary.status, summary.reason, summary.message))

    Orchestrator(load_config(host, []), host, phases=[FilesPhase(), TimePhase()],
                 reporters=[Recorder()]).run()
    assert seen == [
        ("Unknown", "InProgress", "network running (NetworkReady)"),
        ("Unknown", "InProgress", "time running (TimeSynchronized); done: NetworkReady"),
        ("True", "Bootstrapped", "all phases completed"),
    ]


def test_a_bootstrapped_node_keeps_its_summary_while_a_phase_is_applied_again(
        tmp_path: Path) -> None:
    host = Host(tmp_path)
    Orchestrator(load_config(host, []), host, phases=[FilesPhase()],
                 reporters=[LocalStatus(host)]).run()
    seen: list[str] = []

    class Gone(FilesPhase):
        def still_holds(self, ctx: PhaseContext, result: Any) -> bool:
            return False  # the node no longer shows the result: applied again

    class Recorder:
        def publish(self, conditions: list[Condition], final: bool) -> None:
            seen.append(next(c for c in conditions if c.type == SUMMARY).status)

    Orchestrator(load_config(host, []), host, phases=[Gone()], reporters=[Recorder()]).run()
    assert seen == ["True", "True"]
