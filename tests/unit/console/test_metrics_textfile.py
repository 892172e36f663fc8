"""The run's metrics where operators look: node_exporter's textfile collector directory.
What an operator checks: the file is there after a run (only where node_exporter's
directory is), it parses as Prometheus' exposition format, and it says which phase failed,
how often it was tried, and how long each phase took."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.cli import main
from agent.config import load_config
from agent.host import Clock, Host
from agent.orchestrator import Orchestrator
from agent.report import LocalStatus, Reporter
from agent.report.metrics import MetricsTextfile
from tests.phases_for_tests import FilesPhase

EXAMPLE = str(Path(__file__).parents[3] / "examples" / "local-only.yaml")
TEXTFILE = "/var/lib/prometheus/node-exporter/machine-agent.prom"
SAMPLE = re.compile(r'^[a-z_]+(\{([a-z_]+="([^"\\\n]|\\.)*",?)+\})? -?[0-9.e+]+$')


class NoSleep(Clock):
    def sleep(self, seconds: float) -> None:
        pass


def samples(text: str) -> dict[str, float]:
    """Every sample line, checked against the exposition format."""
    found = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        assert SAMPLE.match(line), f"not an exposition-format sample: {line!r}"
        name, value = line.rsplit(" ", 1)
        found[name] = float(value)
    return found


def run_files_phase(root: Path, fail_times: int) -> str:
    """The test phase, failing `fail_times` times (the default spec.retry: 5 attempts)."""
    host = Host(root, clock=NoSleep())
    (root / TEXTFILE.lstrip("/")).parent.mkdir(parents=True)
    loaded = load_config(host, [])
    orchestrator = Orchestrator(loaded, host, phases=[FilesPhase(fail_times=fail_times)])
    reporters: list[Reporter] = [LocalStatus(host), MetricsTextfile(
        host, orchestrator.journal, {"NetworkReady": "network"}, TEXTFILE)]
    orchestrator.reporters.extend(reporters)
    orchestrator.run()
    return (root / TEXTFILE.lstrip("/")).read_text()


def test_a_phase_that_succeeds_on_its_third_attempt_says_three(tmp_path: Path) -> None:
    found = samples(run_files_phase(tmp_path, fail_times=2))
    assert found["machine_agent_bootstrapped"] == 1
    assert found['machine_agent_phase_attempts{phase="network"}'] == 3


def test_a_successful_run_says_bootstrapped_with_each_phases_time_and_attempts(
        tmp_path: Path) -> None:
    found = samples(run_files_phase(tmp_path, fail_times=0))
    assert found["machine_agent_bootstrapped"] == 1
    assert found['machine_agent_phase_attempts{phase="network"}'] == 1
    assert found['machine_agent_phase_duration_seconds{phase="network"}'] >= 0
    assert found['machine_agent_phase_outcome{phase="network",condition="NetworkReady",'
                 'status="True",reason="NetworkConfigured"}'] == 1
    assert found["machine_agent_last_run_timestamp_seconds"] > 1.7e9
    assert found["machine_agent_run_duration_seconds"] >= 0


def test_retries_are_counted_and_a_failure_names_its_reason(tmp_path: Path) -> None:
    found = samples(run_files_phase(tmp_path, fail_times=9))
    assert found["machine_agent_bootstrapped"] == 0
    assert found['machine_agent_phase_attempts{phase="network"}'] == 5
    assert found['machine_agent_phase_outcome{phase="network",condition="NetworkReady",'
                 'status="False",reason="IPAMUnavailable"}'] == 1


def test_status_long_counts_the_attempts_of_a_retried_phase(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_files_phase(tmp_path, fail_times=9)
    capsys.readouterr()
    main(["--root", str(tmp_path), "status", "--long"])
    assert "phase:    network, failed, 5 attempts" in capsys.readouterr().out


def test_a_run_writes_the_textfile_only_where_node_exporters_directory_is(
        tmp_path: Path) -> None:
    args = ["run", "--skip", "join", "--skip", "cni", "-c", EXAMPLE]
    bare, with_exporter = tmp_path / "bare", tmp_path / "exporter"
    (with_exporter / TEXTFILE.lstrip("/")).parent.mkdir(parents=True)
    for root in (bare, with_exporter):
        assert main(["--root", str(root), *args]) == 0
    assert not (bare / "var/lib/prometheus").exists()
    written = with_exporter / TEXTFILE.lstrip("/")
    assert oct(written.stat().st_mode & 0o777) == "0o644"  # node_exporter is not root
    found = samples(written.read_text())
    assert found["machine_agent_bootstrapped"] == 0  # join and cni were not run
    assert {k for k in found if k.startswith("machine_agent_phase_attempts")} == {
        'machine_agent_phase_attempts{phase="network"}',
        'machine_agent_phase_attempts{phase="time"}'}
