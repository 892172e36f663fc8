"""`config validate` (each file on its own, or the stack with --merged), `config show`
offline, and `config schema`: a JSON Schema from the model every example passes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from agent.cli import main
from agent.config import AgentSpec
from agent.records import key_of

REPO = Path(__file__).parents[3]
EXAMPLES = sorted(str(p) for p in (REPO / "examples").glob("*.yaml"))
HEAD = "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"


def test_the_readme_headline_validates_every_example_each_on_its_own(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert len(EXAMPLES) >= 5
    assert main(["config", "validate", *EXAMPLES]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{f}: valid" for f in EXAMPLES]


def test_each_files_errors_are_its_own(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    first = tmp_path / "first.yaml"
    first.write_text(HEAD + "spec:\n  tme: {}\n")
    good = tmp_path / "good.yaml"
    good.write_text(HEAD + "spec:\n  time:\n    maxOffset: 50ms\n")
    last = tmp_path / "last.yaml"
    last.write_text(HEAD + "spec:\n  retry:\n    attempts: many\n")
    assert main(["config", "validate", str(first), str(good), str(last)]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"{good}: valid"]
    errors = captured.err.splitlines()[1:]
    assert errors == [
        f"  {first}: spec.tme: unknown field (did you mean 'time'?)",
        f"  {last}: spec.retry.attempts: expected an integer, got a string ('many')"]


def test_merged_validates_the_stack_in_order(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(HEAD + "spec:\n  retry:\n    attempts: many\n")
    fix = tmp_path / "fix.yaml"
    fix.write_text(HEAD + "spec:\n  retry:\n    attempts: 3\n")
    assert main(["config", "validate", str(base)]) == 2  # alone, it is wrong
    capsys.readouterr()
    assert main(["config", "validate", "--merged", str(base), str(fix)]) == 0  # later wins
    assert "2 file(s) valid as one configuration" in capsys.readouterr().out
    assert main(["config", "validate", "--merged", str(fix), str(base)]) == 2
    assert f"{base}: spec.retry.attempts" in capsys.readouterr().err


def test_config_show_is_offline_with_a_management_cluster(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A closed port: any attempt to reach the cluster would fail the command."""
    (tmp_path / "etc/machine-agent").mkdir(parents=True)
    (tmp_path / "etc/machine-agent/config.yaml").write_text(
        HEAD + "spec:\n  management:\n    server: https://127.0.0.1:9\n"
        "    tokenFile: /etc/machine-agent/token\n"
        "  identity:\n    machine: {namespace: site-a, name: worker-0}\n")
    assert main(["--root", str(tmp_path), "config", "show"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["spec"]["management"]["server"] == "https://127.0.0.1:9"
    assert main(["--root", str(tmp_path), "config", "show", "--origin"]) == 0
    assert 'spec.management.server = "https://127.0.0.1:9"  # /etc/machine-agent/config.yaml' \
        in capsys.readouterr().out
    # --from-machine does go there (and says why it could not)
    assert main(["--root", str(tmp_path), "config", "show", "--from-machine"]) != 0


@pytest.fixture(scope="module")
def schema() -> dict[str, object]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["config", "schema"]) == 0
    doc: dict[str, object] = json.loads(out.getvalue())
    jsonschema.Draft202012Validator.check_schema(doc)
    return doc


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: Path(p).name)
def test_every_example_passes_the_schema(schema: dict[str, object], example: str) -> None:
    jsonschema.validate(yaml.safe_load(Path(example).read_text()), schema,
                        cls=jsonschema.Draft202012Validator)


@pytest.mark.parametrize(("spec", "complaint"), [
    ({"tme": {}}, "Additional properties are not allowed ('tme' was unexpected)"),
    ({"time": {"syncTimeout": "5 minutes"}}, "is not valid under any of the given schemas"),
    ({"time": {"onTimeout": "ignore"}}, "'ignore' is not one of ['fail', 'warn']"),
    ({"retry": {"attempts": "many"}}, "'many' is not of type 'integer'"),
    ({"network": {"renderer": "ifupdown"}}, "'ifupdown' is not one of"),
])
def test_the_schema_refuses_what_config_validate_refuses(
        schema: dict[str, object], spec: dict[str, object], complaint: str,
        tmp_path: Path) -> None:
    doc = {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig", "spec": spec}
    errors = [e.message for e in
              jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    assert any(complaint in e for e in errors), errors
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["config", "validate", str(path)]) == 2


def test_the_schema_is_generated_from_the_model(schema: dict[str, object]) -> None:
    defs = schema["$defs"]
    assert isinstance(defs, dict)
    spec = defs["AgentSpec"]
    for f in dataclasses.fields(AgentSpec):
        prop = spec["properties"][key_of(f)]
        assert prop["description"] == f.metadata["doc"]  # as docs/configuration.md says
    assert schema["required"] == ["apiVersion", "kind"]
