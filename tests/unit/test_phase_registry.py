"""One registry lists the phases: a phase added by another package through the entry
point group alone is planned, run, reported, skippable, configured and in doctor; and no
other module of the agent lists the phases' names."""

from __future__ import annotations

import ast
import json
import tempfile
from pathlib import Path

import pytest

from agent.cli import main
from agent.errors import PermanentError
from agent.phases import registry
from agent.phases.facts import Fact, NodeName
from tests.plugins.install import install
from tests.plugins.motd import MOTD, MotdPhase

AGENT = Path(__file__).parents[2] / "agent"


@pytest.fixture
def motd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tests/plugins/motd.py installed as a distribution declares a phase; the node's
    root for the commands."""
    install(tmp_path / "site", monkeypatch)
    root = tmp_path / "root"
    root.mkdir()
    return root


def config(root: Path, text: str) -> str:
    path = root.parent / "config.yaml"
    path.write_text("apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n" + text)
    return str(path)


def test_an_installed_phase_runs_where_it_says(motd: Path) -> None:
    assert registry.names() == ("network", "time", "motd", "join", "cni", "quiet")
    assert [p.name for p in registry.load()] == list(registry.names())


def test_the_cli_offers_it_to_only_skip_and_doctor(
        motd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["run"], ["doctor"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        assert "motd" in capsys.readouterr().out


def test_it_is_planned_run_and_reported(motd: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    cfg = config(motd, "spec:\n  phases:\n    motd: {message: welcome to worker-0}\n")
    root = ["--root", str(motd)]
    assert main([*root, "plan", "--only", "motd", "-c", cfg]) == 0
    out = capsys.readouterr().out
    assert f"motd: 1 change(s)\n  ~ create {MOTD}" in out and "+welcome to worker-0" in out
    assert not (motd / MOTD.lstrip("/")).exists()

    assert main([*root, "run", "--only", "motd", "-c", cfg]) == 0
    assert "motd     applied 1 change(s)" in capsys.readouterr().out
    assert (motd / MOTD.lstrip("/")).read_text() == "welcome to worker-0\n"
    # 1: the node is not bootstrapped, only motd ran (docs/on-the-node.md, exit status)
    assert main([*root, "status", "--json"]) == 1
    conditions = {c["type"]: c for c in json.loads(capsys.readouterr().out)["conditions"]}
    assert conditions["MotdWritten"]["status"] == "True"
    assert conditions["MotdWritten"]["reason"] == "Completed"
    assert conditions["MotdWritten"]["message"] == f"message of the day in {MOTD}"

    assert main([*root, "run", "--only", "motd", "-c", cfg]) == 0
    assert "motd     up to date" in capsys.readouterr().out


def test_a_phase_without_settings_runs_last_by_default(
        motd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(motd), "run", "--only", "quiet"]) == 0
    assert "quiet    applied 0 change(s)" in capsys.readouterr().out


def test_it_is_skipped_by_the_configuration_and_the_command_line(
        motd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = config(motd, "spec:\n  skipPhases: [motd]\n")
    assert main(["--root", str(motd), "run", "--only", "motd", "-c", cfg]) == 0
    assert "motd     skipped" in capsys.readouterr().out
    assert main(["--root", str(motd), "plan", "--only", "motd", "--skip", "motd"]) == 0
    assert "motd" not in capsys.readouterr().out
    assert not (motd / MOTD.lstrip("/")).exists()


def test_its_settings_and_name_are_checked_with_the_configuration(
        motd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = config(motd, "spec:\n  skipPhases: [motdd]\n  phases:\n"
                       "    motd: {message: \"two\\nlines\"}\n    nope: {}\n")
    assert main(["config", "validate", cfg]) == 2
    err = capsys.readouterr().err
    assert "spec.skipPhases[0]: 'motdd' is not a phase (phases are: network, time, motd, " \
           "join, cni, quiet)" in err
    assert "spec.phases.motd.message: must be one line" in err
    assert "spec.phases.nope: no installed phase 'nope' takes settings" in err


def test_doctor_runs_its_checks(motd: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(motd.parent))  # doctor's scratch
    cfg = config(motd, "spec:\n  phases:\n    motd: {message: hi}\n")
    assert main(["--root", str(motd), "doctor", "--phase", "motd", "-c", cfg]) == 1
    assert f"FAIL  motd       file: {MOTD} is missing or differs" in capsys.readouterr().out
    assert main(["--root", str(motd), "run", "--only", "motd", "-c", cfg]) == 0
    capsys.readouterr()
    assert main(["--root", str(motd), "doctor", "--phase", "motd", "-c", cfg]) == 0
    assert f"PASS  motd       file: {MOTD} holds the message" in capsys.readouterr().out


def test_without_plugins_the_phases_are_the_agents_own() -> None:
    assert registry.names() == tuple(e.name for e in registry.BUILTIN)


def _lists_of_phase_names(tree: ast.AST) -> list[int]:
    """Lines of literals (tuple, list, set, dict, Literal[...]) naming two or more phases,
    as items or as the arguments of their items (e.g. a tuple of `Entry("network", ...)`)."""
    names = {e.name for e in registry.BUILTIN}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [*filter(None, node.keys), *node.values]
        else:
            continue
        named = {n.value for i in items for n in (i, *(i.args if isinstance(i, ast.Call)
                                                         else ()))
                 if isinstance(n, ast.Constant) and n.value in names}
        if len(named) >= 2:
            found.append(node.lineno)
    return sorted(found)


def test_nothing_but_the_registry_lists_the_phases() -> None:
    listed = {str(path.relative_to(AGENT.parent)): lines
              for path in sorted(AGENT.rglob("*.py"))
              if (lines := _lists_of_phase_names(ast.parse(path.read_text())))}
    assert set(listed) == {"agent/phases/registry.py"}, listed


def test_the_pin_would_see_a_list_of_phase_names() -> None:
    assert _lists_of_phase_names(ast.parse('X = ("network", "cni")\n'
                                           'Y: Literal["time", "join"]\n'
                                           'Z = [E("time"), E("cni")]\n')) == [1, 2, 3]


def test_a_run_whose_plugin_phase_completed_is_bootstrapped(
        motd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every phase done, the plugin's with the generic reason `Completed`: `status` says
    bootstrapped and exits 0 (it said "with recoverable problems", 2)."""
    builtin = ", ".join(e.name for e in registry.BUILTIN)
    cfg = config(motd, f"spec:\n  skipPhases: [{builtin}]\n")
    root = ["--root", str(motd)]
    assert main([*root, "run", "-c", cfg]) == 0
    capsys.readouterr()
    assert main([*root, "status", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["outcome"] == "bootstrapped"
    assert {c["type"]: c["reason"] for c in doc["conditions"]}["MotdWritten"] == "Completed"


def test_every_phase_succeeds_with_a_reason_that_says_nothing_is_wrong(motd: Path) -> None:
    assert {p.name: str(p.success) for p in registry.load()
            if not p.success.info.healthy} == {}


def test_join_needs_the_clock_checked_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """The order is checked, not only listed: join declares that it needs what time
    provides, so a registry that put join first is refused, naming both."""
    by_name = {e.name: e for e in registry.BUILTIN}
    monkeypatch.setattr(registry, "BUILTIN", tuple(
        by_name[n] for n in ("network", "join", "time", "cni")))
    with pytest.raises(PermanentError) as info:
        registry.load()
    assert info.value.message == ("phase join needs ClockChecked, which phase time "
                                  "provides, but runs before it")


def test_a_plugin_that_needs_a_fact_nothing_provides_is_refused(
        motd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Late(Fact):
        pass

    monkeypatch.setattr(MotdPhase, "needs", (NodeName, Late))
    with pytest.raises(PermanentError) as info:
        registry.load()
    # motd runs after time: before join, which provides the Node's name
    assert "phase motd needs NodeName, which phase join provides" in info.value.message
    monkeypatch.setattr(MotdPhase, "needs", (Late,))
    with pytest.raises(PermanentError, match="motd needs Late, which no installed phase "
                                             "provides"):
        registry.load()

