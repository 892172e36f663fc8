"""The happy path, as a user runs it: the demo command, and the same sandbox from pytest."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from machine_agent_sandbox.sandbox import Sandbox

from tests.e2e.conftest import assert_bootstrapped, data_addresses, effects

pytestmark = pytest.mark.allow_processes


def test_node_bootstraps_and_reports_every_phase_on_its_machine(
        bring_up: Callable[[int], Sandbox]) -> None:
    box = bring_up(1)
    (node,) = box.nodes
    code, lines = node.run("run")
    assert code == 0, "\n".join(lines)
    assert_bootstrapped(box, node)
    machine = box.admin.machine(node.name)
    assert machine["spec"]["readinessGates"] == [{"conditionType": "NodeBootstrapped"}]
    assert data_addresses(box, node) == ["192.0.2.10/24"]
    route = box.network.ip("-n", node.netns, "route", "show", "default")
    assert route.startswith("default via 192.0.2.1 dev eth0")
    time = box.conditions(node)["TimeSynchronized"]["message"]
    assert time.startswith("clock synchronised to 203.0.113.123")
    assert (node.root / "run/cluster-api/bootstrap-success.complete").read_text() == "success\n"
    # the management API saw the agent's reports under its own field manager
    managers = {m["manager"] for m in machine["metadata"]["managedFields"]}
    assert {"machine-agent", "capi-machine-controller"} <= managers


def test_second_run_changes_nothing(bring_up: Callable[[int], Sandbox]) -> None:
    box = bring_up(1)
    (node,) = box.nodes
    assert node.run("run")[0] == 0
    code, lines = node.run("--log-level", "debug", "run")
    assert code == 0, "\n".join(lines)
    assert "nothing to do: every phase is up to date" in lines
    assert effects(lines) == []
    assert_bootstrapped(box, node)


def test_demo_command_runs_end_to_end_and_leaves_nothing_behind() -> None:
    demo = subprocess.run([sys.executable, "-m", "agent.cli", "demo"], capture_output=True,
                          text=True, timeout=60)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    out = demo.stdout
    assert "as expected: NodeBootstrapped is True: the node bootstrapped" in out
    assert "address   192.0.2.10/24 on eth0" in out
    assert "- conditionType: NodeBootstrapped" in out
    assert "reason: Bootstrapped" in out
    # Nothing to look at once removed: only how to keep it, runnable as printed.
    assert "Where to look" not in out
    assert f"`{sys.executable} -m agent.cli demo --keep` leaves it up to look around" in out
    base = Path(next(w for w in out.split() if w.startswith("/tmp/ma-sandbox-")).split("/n0")[0])
    tag = base.name.removeprefix("ma-sandbox-")
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                check=True, timeout=10).stdout
    assert tag not in namespaces
    assert not base.exists()
    assert not [p for p in Path("/proc").glob("[0-9]*/cmdline")
                if str(base).encode() in _read(p)]


def test_demo_keep_leaves_the_sandbox_up_until_cleanup() -> None:
    demo = subprocess.run([sys.executable, "-m", "agent.cli", "demo", "--keep"],
                          capture_output=True, text=True, timeout=60)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    # The commands it prints run when copied: they name this machine-agent (here the
    # module through this interpreter), not a `machine-agent` that may not be on PATH.
    assert f"{sys.executable} -m agent.cli demo --cleanup" in demo.stdout
    view = demo.stdout.split("the agent's view", 1)[1].split("\n  the Machine", 1)[0]
    shown = subprocess.run(view.replace("\\\n", " "), shell=True, capture_output=True,
                           text=True, timeout=60)
    assert shown.returncode == 0, view + shown.stdout + shown.stderr
    assert "NodeBootstrapped" in shown.stdout, shown.stdout
    base = Path(next(w for w in demo.stdout.split()
                     if w.startswith("/tmp/ma-sandbox-")).split("/n0")[0])
    node_ns = f"ma-{base.name.removeprefix('ma-sandbox-')}-n0"
    try:
        shown = subprocess.run(["ip", "-n", node_ns, "-brief", "addr", "show", "eth0"],
                               capture_output=True, text=True, timeout=10, check=True).stdout
        assert "192.0.2.10/24" in shown
    finally:
        cleanup = subprocess.run([sys.executable, "-m", "agent.cli", "demo", "--cleanup"],
                                 capture_output=True, text=True, timeout=60)
    assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr
    assert f"removed sandbox {base}" in cleanup.stdout
    assert not base.exists()
    assert node_ns not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                         text=True, check=True, timeout=10).stdout


def test_demo_without_root_says_what_to_run_instead(tmp_path: Path) -> None:
    demo = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           sys.executable, "-m", "agent.cli", "demo"], capture_output=True,
                          text=True, timeout=60, cwd=Path(__file__).parents[2])
    assert demo.returncode == 2, demo.stdout + demo.stderr
    assert "machine-agent demo needs root" in demo.stdout
    assert f"Run it as root, e.g.:  sudo {sys.executable} -m agent.cli demo\n" in demo.stdout
    cleanup = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              sys.executable, "-m", "agent.cli", "demo", "--cleanup"],
                             capture_output=True, text=True, timeout=60,
                             cwd=Path(__file__).parents[2])
    assert cleanup.returncode == 2, cleanup.stdout + cleanup.stderr
    assert "machine-agent demo --cleanup needs root: it deletes the sandboxes'" in cleanup.stdout
    assert f"sudo {sys.executable} -m agent.cli demo --cleanup\n" in cleanup.stdout


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""
