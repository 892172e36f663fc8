"""The state directory read-only or full: the run stops with a clear error naming the file
and the cause (no traceback), and the journal of the previous run is intact, byte for byte.

Each fault lives in a private mount namespace (`unshare -m`) over the test's own state
directory: a read-only bind mount, or a 64 KiB tmpfs filled up. Nothing outside the test's
temporary tree is mounted, and the mounts vanish with the namespace.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.allow_processes
STATE = "var/lib/machine-agent"
CONFIG = """apiVersion: machine-agent.io/v1alpha1
kind: AgentConfig
spec:
  network:
    hostname: {name}.example.net
"""


def agent_run(root: Path, prepare: str = "") -> subprocess.CompletedProcess[str]:
    """`machine-agent run --only network` on root, after `prepare` ran in the same private
    mount namespace ($S is the state directory, $OUT a directory outside it)."""
    agent = f"{sys.executable} -m agent.cli --root {root} run --only network"
    script = f"S={root / STATE}; OUT={root.parent}; {prepare}\n{agent}; " \
             "code=$?; cat $S/journal.json > $OUT/journal.after; exit $code"
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A node that completed a run, then got a new host name: the next run has work."""
    node = tmp_path / "root"
    config = node / "etc/machine-agent/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(CONFIG.format(name="before"))
    first = agent_run(node)
    assert first.returncode == 0, first.stdout + first.stderr
    config.write_text(CONFIG.format(name="after"))
    return node


def test_read_only_state_directory_is_a_clear_error_and_the_journal_is_intact(
        root: Path) -> None:
    journal = (root / STATE / "journal.json").read_bytes()
    run = agent_run(root, "mount --bind $S $S && mount -o remount,bind,ro $S")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert "cannot write /var/lib/machine-agent/" in run.stderr
    assert "Read-only file system" in run.stderr
    assert (root / STATE / "journal.json").read_bytes() == journal
    assert (root.parent / "journal.after").read_bytes() == journal


def test_full_state_directory_is_a_clear_error_and_the_journal_is_intact(
        root: Path) -> None:
    journal = (root / STATE / "journal.json").read_bytes()
    fill = ("cp -a $S/. $OUT/state.copy && mount -t tmpfs -o size=64k,mode=0700 tmpfs $S && "
            "cp -a $OUT/state.copy/. $S/ && "
            "(dd if=/dev/zero of=$S/filler bs=4k 2>/dev/null || true)")
    run = agent_run(root, fill)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert "cannot write /var/lib/machine-agent/" in run.stderr
    assert "No space left on device" in run.stderr
    assert (root.parent / "journal.after").read_bytes() == journal
