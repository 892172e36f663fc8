"""The commands `machine-agent demo` prints run when copied into a shell: they name this
machine-agent as it was started, not one that may not be on PATH."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from machine_agent_sandbox.demo import agent_command


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_a_venv_executable_not_on_path_is_named_by_its_full_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # README's install: `.venv/bin/machine-agent demo`, the venv not activated
    started = executable(tmp_path / "my venv/bin/machine-agent")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["my venv/bin/machine-agent", "demo"])
    monkeypatch.setenv("PATH", "/nonexistent")
    assert shlex.split(agent_command()) == [str(started)]


def test_the_machine_agent_on_path_is_named_by_its_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = executable(tmp_path / "bin/machine-agent")
    monkeypatch.setattr(sys, "argv", [str(started), "demo"])
    monkeypatch.setenv("PATH", str(started.parent))
    assert agent_command() == "machine-agent"
    monkeypatch.setenv("PATH", str(executable(tmp_path / "other/machine-agent").parent))
    assert shlex.split(agent_command()) == [str(started)]  # another one is on PATH


def test_the_module_run_by_this_interpreter_is_named_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [str(Path("agent/cli.py").absolute()), "demo"])
    assert shlex.split(agent_command()) == [sys.executable, "-m", "agent.cli"]
