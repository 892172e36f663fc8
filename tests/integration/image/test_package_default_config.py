"""The package's own configuration (images/deb/config.yaml, what an image carries before any
per-node value arrives): `plan` and `doctor` work on it, saying what is missing instead of
failing on it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.cli import main
from tests.cni_fixtures import node_namespace

PACKAGE_CONFIG = Path(__file__).parents[3] / "images/deb/config.yaml"


@pytest.fixture
def image(tmp_path: Path) -> Path:
    (tmp_path / "etc/machine-agent").mkdir(parents=True)
    shutil.copy(PACKAGE_CONFIG, tmp_path / "etc/machine-agent/config.yaml")
    return tmp_path


@pytest.mark.allow_processes
def test_plan_on_the_package_config_says_the_join_waits_for_its_source(
        image: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with node_namespace() as netns:
        code = main(["--root", str(image), "--netns", netns, "plan"])
    out = capsys.readouterr().out
    assert code == 0
    assert "join: 0 change(s)" in out
    assert "nothing to plan: no bootstrap data yet" in out and "set spec.management" in out


@pytest.mark.allow_processes
def test_doctor_on_the_package_config_warns_and_fails_nothing(
        image: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with node_namespace() as netns:
        code = main(["--root", str(image), "--netns", netns, "doctor"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "FAIL" not in out
    assert "WARN  join       source: no bootstrap data yet" in out
