"""Commands added by other distributions (entry points, e.g. the sandbox's `demo`) are
found only when the command line may name one: the agent's own commands do not read
every installed distribution's metadata, and a broken plugin cannot stop them."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import cli


def broken_plugin() -> list[object]:
    raise ImportError("a third-party command plugin that fails to import")


@pytest.mark.parametrize("argv", [["version"], ["--version"],
                                  ["--log-level", "warning", "--root", ".", "version"]])
def test_the_agents_own_commands_run_beside_a_broken_plugin(
        argv: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "_plugin_commands", broken_plugin)
    try:
        code = cli.main(argv)
    except SystemExit as stop:  # --version exits from the parser
        code = int(stop.code or 0)
    assert code == 0
    assert capsys.readouterr().out.startswith("machine-agent ")


def test_status_runs_beside_a_broken_plugin(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "_plugin_commands", broken_plugin)
    cli.main(["--root", str(tmp_path), "status"])
    assert "no run recorded on this boot yet" in capsys.readouterr().out


def test_a_plugins_command_and_the_help_still_find_the_plugins(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.main(["--help"])
    assert stop.value.code == 0
    assert "demo" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        cli.main(["--log-level", "debug", "demo", "--help"])
    assert stop.value.code == 0
    assert "usage: machine-agent demo" in capsys.readouterr().out
