"""`machine-agent analyze`: where a boot's run spent its time, per phase and per external
wait, as `cloud-init analyze blame` shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from agent.report import STATUS_FILE

from .test_status import Waits, bootstrap, network, time_phase


def analyze(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["--root", str(root), "analyze", *args]) == 0
    return capsys.readouterr().out


def test_each_phase_and_each_wait_with_its_duration(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap(tmp_path, [network(), time_phase()], setup=4.0)
    doc = json.loads(analyze(tmp_path, capsys, "--format", "json"))
    assert doc["seconds"] == pytest.approx(9.5)
    assert doc["outcome"] == "Bootstrapped"
    spans = [(s["kind"], s["phase"], s["name"], s["seconds"]) for s in doc["spans"]]
    assert spans == [
        ("setup", None, "(set-up: configuration, cloud-init, the Machine and its bootstrap "
         "data)", 4.0),
        ("phase", "network", "network", 2.0),
        ("wait", "network", "checking that gateway 192.0.2.1 answers on eth0", 2.0),
        ("phase", "time", "time", 3.5),
        # three polls of one wait are one span, named by the last poll
        ("wait", "time", "waiting for the clock to synchronise (offset 2ms)", 3.5),
    ]


def test_blame_lists_the_slowest_waits_first(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap(tmp_path, [network(), time_phase()], setup=4.0)
    out = analyze(tmp_path, capsys)
    assert out.splitlines()[0] == \
        "-- run started 2026-12-03T09:00:00.000Z: 9.500s, Bootstrapped"
    blame = out[out.index("-- slowest waits"):].splitlines()[1:]
    assert [" ".join(x.split()) for x in blame] == [
        "4.000s (set-up: configuration, cloud-init, the Machine and its bootstrap data)",
        "3.500s time: waiting for the clock to synchronise (offset 2ms)",
        "2.000s network: checking that gateway 192.0.2.1 answers on eth0",
    ]


def test_a_failed_phase_says_so_and_where_the_run_stopped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap(tmp_path, [network(), time_phase(fail="no server answered")])
    out = analyze(tmp_path, capsys)
    assert " ".join(out.splitlines()[0].split()).endswith("5.500s, TimeNotSynchronized")
    assert any(" ".join(x.split()) == "3.500s time (failed)" for x in out.splitlines())


def test_a_long_wait_polled_every_second_keeps_the_file_small(tmp_path: Path) -> None:
    polls = [(f"waiting for the clock to synchronise (offset {n}ms)", 1.0)
             for n in range(120, 0, -1)]
    bootstrap(tmp_path, [Waits("time", "TimeSynchronized", network().success, polls)])
    doc = json.loads((tmp_path / STATUS_FILE.lstrip("/")).read_text())
    assert len(doc["events"]) < 10
    assert len((tmp_path / STATUS_FILE.lstrip("/")).read_bytes()) < 4096


def test_no_run_yet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "no run recorded" in analyze(tmp_path, capsys)
