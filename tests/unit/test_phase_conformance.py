"""Every phase, the agent's own and those installed as plugins (tests/plugins), behaves as
a phase must through the commands a user runs: `plan` names it and changes nothing,
`run` reports it on its condition (a success with a reason that says nothing is wrong
and the facts it declares; a failure with a documented reason and its fix) and is not
applied twice, `doctor --phase` checks it alone."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from machine_agent_sandbox.testkit.bootstrap import cloud_config

from agent.cli import main
from agent.errors import Reason
from agent.host import Host
from agent.phases import registry
from agent.phases.base import Phase
from agent.state import Journal
from tests.plugins.install import PHASES as PLUGINS
from tests.plugins.install import install

NAMES = [*(e.name for e in registry.BUILTIN), *PLUGINS]
FAILS_HERE = {"join": Reason.PreflightFailed}
"""Phases that cannot complete on a unit test's node root (join: no kubeadm, no API
server), with the reason they report."""

CONFIG = """apiVersion: machine-agent.io/v1alpha1
kind: AgentConfig
spec:
  identity: {nodeName: lab-0}
  join:
    bootstrapDataFile: /etc/machine-agent/bootstrap.yaml
    kubernetesVersion: v1.31.2
    nodeRegistration: {name: lab-0}
  phases:
    motd: {message: welcome to lab-0}
"""


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A node root with CABPK's bootstrap data, the configuration, the plugins
    installed."""
    install(tmp_path / "site", monkeypatch)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # doctor's scratch
    root = tmp_path / "root"
    data = root / "etc/machine-agent/bootstrap.yaml"
    data.parent.mkdir(parents=True)
    data.write_text(cloud_config("192.0.2.1:6443"))
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    return root, str(config)


def phase(name: str) -> Phase:
    return next(p for p in registry.load() if p.name == name)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def status(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    main(["--root", str(root), "status", "--json"])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_every_installed_phase_is_covered(node: tuple[Path, str]) -> None:
    assert set(registry.names()) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_plan_names_the_phase_and_changes_nothing(
        name: str, node: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    root, config = node
    before = snapshot(root)
    assert main(["--root", str(root), "plan", "--only", name, "-c", config]) == 0
    assert capsys.readouterr().out.startswith(f"{name}: ")
    assert snapshot(root) == before


@pytest.mark.parametrize("name", NAMES)
def test_run_reports_the_phase_on_its_condition(
        name: str, node: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    root, config = node
    the_phase = phase(name)
    code = main(["--root", str(root), "run", "--only", name, "-c", config])
    capsys.readouterr()
    condition = {c["type"]: c for c in status(root, capsys)["conditions"]}[the_phase.condition]
    record = Journal.load(Host(root)).phases[name]
    if name in FAILS_HERE:
        assert code == 1
        assert (condition["status"], condition["reason"]) == ("False", FAILS_HERE[name])
        assert record.state == "failed"
        main(["--root", str(root), "status", "--long"])
        assert f"fix:      {FAILS_HERE[name].info.fix}" in capsys.readouterr().out
        return
    assert code == 0
    assert condition["status"] == "True" and Reason(condition["reason"]).info.healthy
    assert record.state == "completed"
    facts = the_phase.result_from(record.result or {}).facts()
    assert {type(f) for f in facts} <= set(the_phase.provides)
    assert main(["--root", str(root), "run", "--only", name, "-c", config]) == 0
    assert f"{name:<8} up to date, nothing to apply" in capsys.readouterr().out


@pytest.mark.parametrize("name", NAMES)
def test_doctor_checks_the_phase_alone(
        name: str, node: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    root, config = node
    code = main(["--root", str(root), "doctor", "--phase", name, "-c", config, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["errors"] == []  # every check of the area could run
    assert {c["phase"] for c in doc["checks"]} <= {name}
    assert code == (1 if doc["summary"]["fail"] else 0)
