"""The agent's wheel, the one thing an image installs, holds the node package and its
templates and nothing of the sandbox: no stand-in, no CRDs, no `cryptography` import.
Installed alone in a fresh venv it runs, and offers no `demo`."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).parents[3]
pytestmark = pytest.mark.allow_processes


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--wheel-dir", str(out), str(REPO)], check=True, timeout=300)
    return out


def the_wheel(wheels: Path) -> zipfile.ZipFile:
    (wheel,) = wheels.glob("machine_agent-*.whl")
    return zipfile.ZipFile(wheel)


def test_the_wheel_holds_no_sandbox_module_crd_or_cryptography(wheels: Path) -> None:
    names = the_wheel(wheels).namelist()
    assert not [n for n in names if "sandbox" in n.lower()]
    assert not [n for n in names if n.endswith(".yaml") and "crd" in n.lower()]
    with the_wheel(wheels) as whl:
        for name in names:
            if name.endswith(".py"):
                tree = ast.parse(whl.read(name))
                imported = {a.name.split(".")[0] for node in ast.walk(tree)
                            if isinstance(node, ast.Import) for a in node.names}
                imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                             if isinstance(node, ast.ImportFrom)}
                assert not imported & {"cryptography", "machine_agent_sandbox"}, name


def test_every_template_of_the_repository_is_in_the_wheel(wheels: Path) -> None:
    names = set(the_wheel(wheels).namelist())
    templates = [p.relative_to(REPO / "templates").as_posix()
                 for p in (REPO / "templates").rglob("*") if p.is_file()]
    assert templates
    assert [t for t in templates if f"agent/templates/{t}" not in names] == []


def test_every_package_under_agent_is_in_the_wheel(wheels: Path) -> None:
    names = set(the_wheel(wheels).namelist())
    packages = [p.relative_to(REPO).as_posix() for p in (REPO / "agent").rglob("__init__.py")]
    assert len(packages) > 10
    assert [p for p in packages if p not in names] == []


def test_installed_alone_it_renders_and_offers_no_demo(wheels: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    # The dependencies as pip resolves them, from the index or pip's cache.
    (wheel,) = wheels.glob("machine_agent-*.whl")
    subprocess.run([str(venv / "bin/pip"), "install", "-q", "--disable-pip-version-check",
                    str(wheel)], check=True, timeout=300)
    helped = subprocess.run([str(venv / "bin/machine-agent"), "--help"],
                            capture_output=True, text=True, timeout=60, check=True)
    assert "run" in helped.stdout and "demo" not in helped.stdout
    demo = subprocess.run([str(venv / "bin/machine-agent"), "demo"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert demo.returncode == 2 and "invalid choice: 'demo'" in demo.stderr
    rendered = subprocess.run(
        [str(venv / "bin/python"), "-c",
         "from agent.templating import render, template_dir; print(template_dir()); "
         "print(render('time/timesyncd.conf.j2', hosts=['192.0.2.1']))"],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    assert "site-packages/agent/templates" in rendered.stdout
    assert "NTP=192.0.2.1" in rendered.stdout
