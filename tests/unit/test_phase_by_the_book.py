"""A phase added as docs/design.md ("A new phase") says, in a copy of the agent: its
folder, its templates, its config section, errors.py and one registry line, nothing
else. The agent then plans it, runs it, reports it healthy, checks its settings, lists
it in the reference and doctor, and orders it by what it needs."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.phases import registry

REPO = Path(__file__).parents[2]
pytestmark = pytest.mark.allow_processes  # the copy runs in its own interpreter

FILES = {
    "agent/phases/sysctl/__init__.py": '''
"""The sysctl phase: kernel parameters, in a drop-in of /etc/sysctl.d."""

from agent.phases.sysctl.phase import SysctlPhase

__all__ = ["SysctlPhase"]
''',
    "agent/phases/sysctl/result.py": '''
"""What the sysctl phase proved."""

from __future__ import annotations

from dataclasses import dataclass

from agent.phases.base import PhaseResult


@dataclass
class SysctlResult(PhaseResult):
    path: str = ""
    count: int = 0
''',
    "agent/phases/sysctl/phase.py": '''
"""Kernel parameters from spec.sysctl, written where systemd-sysctl reads them."""

from __future__ import annotations

from agent.config.sysctl import SysctlSpec
from agent.errors import PermanentError, Reason
from agent.phases.base import PhaseContext, PhaseOf, PhasePlan, file_change
from agent.phases.facts import ClockChecked
from agent.phases.sysctl.result import SysctlResult
from agent.templating import render

PATH = "/etc/sysctl.d/90-machine-agent.conf"


class SysctlPhase(PhaseOf[SysctlResult]):
    name = "sysctl"
    condition = "SysctlApplied"
    success = Reason.SysctlApplied
    needs = (ClockChecked,)
    Result = SysctlResult

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        plan = PhasePlan(self.name)
        if (change := file_change(ctx.host, PATH, _text(ctx.config.spec.sysctl))) is not None:
            plan.changes.append(change)
        return plan

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> SysctlResult:
        spec = ctx.config.spec.sysctl
        if ctx.host.read_text(PATH) != _text(spec):
            raise PermanentError(f"{PATH} does not hold spec.sysctl",
                                 reason=Reason.SysctlNotApplied)
        return SysctlResult(PATH, len(spec.settings))

    def message(self, result: SysctlResult) -> str:
        return f"{result.count} kernel parameter(s) in {result.path}"


def _text(spec: SysctlSpec) -> str:
    return render("sysctl/90-machine-agent.conf.j2", settings=sorted(spec.settings.items()))
''',
    "templates/sysctl/90-machine-agent.conf.j2": '''
# Written by machine-agent from spec.sysctl.
{% for key, value in settings %}
{{ key }} = {{ value }}
{% endfor %}
''',
    "agent/config/sysctl.py": '''
"""`spec.sysctl`: kernel parameters the node is given."""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.config.fields import setting

KEY = re.compile(r"^[a-z0-9_]+([./][a-z0-9_-]+)+$")


def _parameters(value: dict[str, str]) -> str | None:
    for key, text in value.items():
        if not KEY.match(key):
            return f"{key[:40]!r} is not a kernel parameter (e.g. net.ipv4.ip_forward)"
        if any(c in text for c in "\\r\\n\\x00"):
            return f"the value of {key} must be one line"
    return None


@dataclass(frozen=True)
class SysctlSpec:
    settings: dict[str, str] = setting("Kernel parameters by name, e.g. "
                                       "`net.ipv4.ip_forward: \\"1\\"`.", factory=dict,
                                       check=_parameters)
''',
}

EDITS = {
    "agent/config/model.py": [
        ("from agent.config.retry import RetrySpec\n",
         "from agent.config.retry import RetrySpec\nfrom agent.config.sysctl import SysctlSpec\n"),
        ("    cni: CNISpec =",
         '    sysctl: SysctlSpec = setting("Kernel parameters.", factory=SysctlSpec)\n'
         "    cni: CNISpec ="),
    ],
    "agent/errors.py": [
        ('    # CNI\n', '    SysctlApplied = "SysctlApplied"\n'
                      '    SysctlNotApplied = "SysctlNotApplied"\n    # CNI\n'),
        ("REASONS: dict[Reason, ReasonInfo] = {\n",
         "REASONS: dict[Reason, ReasonInfo] = {\n"
         '    Reason.SysctlApplied: ReasonInfo("spec.sysctl is written.", "Nothing to do.",\n'
         "                                     healthy=True),\n"
         '    Reason.SysctlNotApplied: ReasonInfo("spec.sysctl could not be written.",\n'
         '                                        "Check /etc/sysctl.d."),\n'),
    ],
    "agent/phases/registry.py": [
        ('    Entry("join", ', '    Entry("sysctl", "agent.phases.sysctl:SysctlPhase"),\n'
                             '    Entry("join", '),
    ],
}


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the agent and its templates with the sysctl phase added by the book."""
    copy = tmp_path_factory.mktemp("by-the-book")
    for tree in ("agent", "templates"):
        shutil.copytree(REPO / tree, copy / tree,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in FILES.items():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_text(text.lstrip("\n"))
    for name, edits in EDITS.items():
        text = (copy / name).read_text()
        for old, new in edits:
            assert text.count(old) == 1, (name, old)
            text = text.replace(old, new)
        (copy / name).write_text(text)
    return copy


def agent(book: Path, *args: str, code: int = 0) -> str:
    env = {**os.environ, "PYTHONPATH": str(book)}
    done = subprocess.run([sys.executable, "-m", "agent.cli", *args], env=env, cwd=book,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == code, done.stdout + done.stderr
    return done.stdout + done.stderr


def changed(book: Path) -> list[str]:
    """Files of the copy that differ from the repository's or are new."""
    out = []
    for tree in ("agent", "templates"):
        for path in sorted((book / tree).rglob("*")):
            mine = REPO / path.relative_to(book)
            if path.is_file() and "__pycache__" not in path.parts and \
                    (not mine.exists() or not filecmp.cmp(path, mine, shallow=False)):
                out.append(path.relative_to(book).as_posix())
    return out


def test_the_phase_touches_the_five_places(book: Path) -> None:
    assert changed(book) == sorted([*FILES, *EDITS])
    imported = subprocess.run(
        [sys.executable, "-c", "import agent.phases.registry as r; print(r.__file__)"],
        env={**os.environ, "PYTHONPATH": str(book)}, cwd=book, capture_output=True,
        text=True, timeout=60, check=True)
    assert imported.stdout.startswith(str(book))  # the copy runs, not the repository


def test_it_is_planned_run_and_reported_healthy(book: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    others = ", ".join(e.name for e in registry.BUILTIN)
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\nspec:\n"
                      f"  skipPhases: [{others}]\n"
                      "  sysctl: {settings: {net.ipv4.ip_forward: '1'}}\n")
    planned = agent(book, "--root", str(root), "plan", "-c", str(config))
    assert "sysctl: 1 change(s)\n  ~ create /etc/sysctl.d/90-machine-agent.conf" in planned
    assert "+net.ipv4.ip_forward = 1" in planned
    assert "sysctl   applied 1 change(s): 1 kernel parameter(s)" in agent(
        book, "--root", str(root), "run", "-c", str(config))
    written = root / "etc/sysctl.d/90-machine-agent.conf"
    assert written.read_text() == "# Written by machine-agent from spec.sysctl.\n" \
                                  "net.ipv4.ip_forward = 1\n"
    shown = agent(book, "--root", str(root), "status")
    assert shown.startswith("status: bootstrapped\n")
    assert "SysctlApplied     True    SysctlApplied" in shown
    assert "sysctl   up to date" in agent(book, "--root", str(root), "run", "-c", str(config))


def test_its_settings_are_checked_and_documented(book: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\nspec:\n"
                      "  skipPhases: [sysctll]\n  sysctl: {settings: {'x y': '1'}}\n")
    refused = agent(book, "config", "validate", str(config), code=2)
    assert "spec.sysctl.settings: 'x y' is not a kernel parameter" in refused
    assert "'sysctll' is not a phase" in refused and "time, sysctl, join" in refused
    reference = subprocess.run([sys.executable, "-m", "agent.reference"], cwd=book,
                               env={**os.environ, "PYTHONPATH": str(book)},
                               capture_output=True, text=True, timeout=60, check=True).stdout
    assert "## SysctlSpec\n" in reference
    assert "| `sysctl` | [SysctlSpec](#sysctlspec) |" in reference
    root = tmp_path / "root"
    root.mkdir()
    config.write_text("apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n")
    assert agent(book, "--root", str(root), "doctor", "--phase", "sysctl", "-c", str(config)
                 ).endswith("0 passed, 0 warning(s), 0 failed\n")


def test_what_it_needs_orders_it(book: Path) -> None:
    """It needs the clock checked: placed before time, the registry refuses it."""
    script = ("from agent.phases import registry as r\n"
              "r.BUILTIN = (r.BUILTIN[2], *r.BUILTIN[:2], *r.BUILTIN[3:])\n"
              "r.load()\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=book, capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(book)}, text=True,
                          timeout=60, check=False)
    assert "phase sysctl needs ClockChecked, which phase time provides, but runs before " \
           "it" in done.stderr
