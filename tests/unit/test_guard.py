"""The suite's own guard fails a test that spawns a process or writes outside its tmp dir."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parents[1] / "conftest.py").read_text()


@pytest.mark.allow_processes
@pytest.mark.parametrize("body", [
    "import subprocess; subprocess.run(['true'])",
    "import os; os.system('true')",
    "open('/var/tmp/machine-agent-guard-probe', 'w')",
    "import os; os.mkdir('/var/tmp/machine-agent-guard-probe-dir')",
])
def test_stray_side_effects_fail_the_test(pytester: pytest.Pytester, body: str) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(f"def test_stray():\n    {body}\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*test side effect outside its sandbox*"])
    assert not Path("/var/tmp/machine-agent-guard-probe").exists()
    assert not Path("/var/tmp/machine-agent-guard-probe-dir").exists()


@pytest.mark.allow_processes
def test_writes_in_tmp_path_and_host_commands_pass(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile("""
import sys
from agent.host import Host

def test_fine(tmp_path):
    (tmp_path / "f").write_text("x")
    Host(tmp_path).run([sys.executable, "-c", "pass"])
""")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
