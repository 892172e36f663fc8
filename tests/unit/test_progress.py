"""Long set-up steps say they are still running (.ci/progress.sh's with_progress, used by
tests/setup.sh, the NetBox set-up and images/build.sh), and keep the step's exit status."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
pytestmark = pytest.mark.allow_processes


def with_progress(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", f"set -e; source .ci/progress.sh; {command}"],
                          cwd=REPO, capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "PROGRESS_EVERY": "1"})


def test_a_long_step_says_it_still_runs_and_its_output_stays() -> None:
    done = with_progress("with_progress 'pip install' bash -c 'echo out; sleep 3.5'")
    assert done.returncode == 0
    assert done.stdout == "out\n"
    ticks = [re.fullmatch(r"   \.\.\. pip install: still running, (\d+)s", line)
             for line in done.stderr.splitlines()]
    seconds = [int(m.group(1)) for m in ticks if m]
    assert len(seconds) == len(ticks) >= 2  # nothing else on stderr, a tick each second
    assert seconds == sorted(set(seconds)) and seconds[-1] <= 4


def test_a_failing_step_fails_the_script() -> None:
    done = with_progress("with_progress apt bash -c 'exit 7'; echo not reached")
    assert done.returncode == 7 and "not reached" not in done.stdout
