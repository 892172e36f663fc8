"""spec.lifecycle as a user writes it: every mistake reported with its path, and the
delete policy's steps as the daemon runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main
from agent.config import load_config
from agent.config.sources import default_sources
from agent.host import Host
from agent.phases import registry

HEADER = "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"


def write(path: Path, text: str) -> Path:
    path.write_text(HEADER + text)
    return path


def test_every_lifecycle_mistake_is_reported_with_its_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path / "bad.yaml", """spec:
  lifecycle:
    reconfigure: [time, cni, time]
    onDelete: {policy: wipe, resetTimeout: 0s}
""")
    assert main(["config", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert ("spec.lifecycle.reconfigure[1]: cni cannot be applied again on a running "
            "node (name only network, time, join)") in err
    assert "spec.lifecycle.onDelete.policy: " in err and "'wipe'" in err
    assert "spec.lifecycle.onDelete.resetTimeout: 0s must be greater than zero" in err


def test_a_phase_listed_twice_and_steps_turned_off_under_keep_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path / "bad.yaml", """spec:
  lifecycle:
    reconfigure: [time, time]
    onDelete: {policy: keep, kubeadmReset: false}
""")
    assert main(["config", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "spec.lifecycle.reconfigure[1]: time is listed twice" in err
    assert "spec.lifecycle.onDelete.policy: keep runs no step" in err


def test_the_default_policy_resets_releases_and_removes_in_that_order(tmp_path: Path) -> None:
    spec = load_config(Host(tmp_path), default_sources([str(write(
        tmp_path / "c.yaml", "spec:\n  lifecycle:\n    onDelete: {releaseAddresses: false}\n"
    ))])).config.spec.lifecycle
    assert spec.on_delete.steps == ["kubeadmReset", "removeCniConfig"]
    assert spec.reconfigure is None and spec.watch
    # unset: every phase that can be applied again on a running node
    assert [p.name for p in registry.load() if p.reconfigurable] == ["network", "time",
                                                                      "join"]
