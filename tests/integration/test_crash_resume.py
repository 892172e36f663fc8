"""A run killed right after any of its side effects completes correctly on the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]


def run_child(root: Path, crash_after: int | None) -> int:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MACHINE_AGENT_CRASH_AFTER", None)
    if crash_after is not None:
        env["MACHINE_AGENT_CRASH_AFTER"] = str(crash_after)
    proc = subprocess.run([sys.executable, "-m", "tests.phases_for_tests", str(root)],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    return proc.returncode


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    skip = {"var/lib/machine-agent/journal.json", "var/lib/machine-agent/status.json"}
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(root.rglob("*")) if p.is_file()
            and str(p.relative_to(root)) not in skip}


@pytest.mark.allow_processes
def test_killed_after_every_side_effect_then_rerun_matches_an_uninterrupted_run(
        tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    assert run_child(reference, None) == 0
    expected = tree(reference)
    assert expected["var/log/steps.log"][0] == b"appended once\n"
    n = 1
    while True:
        root = tmp_path / f"crash-{n}"
        code = run_child(root, n)
        if code == 0:  # the run finished before its Nth side effect: all points covered
            break
        assert code == -signal.SIGKILL, f"crash point {n}: exit {code}"
        assert run_child(root, None) == 0, f"rerun after crash point {n} failed"
        assert tree(root) == expected, f"crash point {n}: state differs from a clean run"
        n += 1
        assert n < 50, "more side effects than this phase makes: the crash hook is not firing"
    assert n > 5  # journal writes, files, status: many distinct crash points were covered
