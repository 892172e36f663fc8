"""docs/operating-from-the-management-cluster.md, run: the kubectl commands it gives,
taken from the document itself, against the sandbox's management API after a failed
bootstrap (the NTP server down), show what the document says they show."""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from machine_agent_sandbox.faults import CATALOGUE
from machine_agent_sandbox.sandbox import Sandbox

pytestmark = pytest.mark.allow_processes

DOC = Path(__file__).parents[2] / "docs/operating-from-the-management-cluster.md"


def documented(start: str) -> list[str]:
    """The first command of the document starting with `start`, as an argument list."""
    for line in DOC.read_text().splitlines():
        if line.startswith(start):
            return shlex.split(line)
    raise AssertionError(f"the document has no command starting {start!r}")


def test_the_documented_commands_show_why_a_node_failed(
        bring_up: Callable[[int], Sandbox]) -> None:
    box = bring_up(1)
    (node,) = box.nodes
    CATALOGUE["ntp-down"].arrange(box)
    code, lines = node.run("run")
    assert code in (1, 3), "\n".join(lines)
    prefix = box.kubectl()  # the stand-in's admin, or MACHINE_AGENT_TEST_KUBECONFIG's

    def kubectl(argv: list[str]) -> subprocess.CompletedProcess[str]:
        assert argv[0] == "kubectl"
        # the document's namespace and Machine are the demo's; the sandbox's may differ
        args = [box.admin.ns if a == "demo" else a.replace("demo-worker-0", node.name)
                for a in argv[1:]]
        return subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=60)

    listing = kubectl(documented("kubectl get machines -A -o custom-columns="))
    assert listing.returncode == 0, listing.stderr
    row = next(x.split() for x in listing.stdout.splitlines() if node.name in x)
    assert row[-2:] == ["False", "TimeNotSynchronized"]

    why = kubectl(documented("kubectl get machine demo-worker-0 -n demo -o jsonpath="))
    assert why.returncode == 0, why.stderr
    failed = dict(line.split("\t", 1) for line in why.stdout.splitlines())
    assert failed["TimeSynchronized"].startswith("TimeNotSynchronized\t")
    assert "203.0.113.123 unreachable" in failed["TimeSynchronized"]
    assert failed["NodeBootstrapped"].startswith("TimeNotSynchronized\tTimeSynchronized: ")

    events = kubectl(documented("kubectl get events.events.k8s.io -n demo --sort-by"))
    assert events.returncode == 0, events.stderr
    warnings = [x for x in events.stdout.splitlines() if " Warning " in x]
    assert any(re.search(r"TimeNotSynchronized\s+TimeSynchronized is False", x)
               for x in warnings), events.stdout

    wait = documented("kubectl wait -n demo --for=condition=NodeBootstrapped machine/")
    timed_out = kubectl([*wait[:-1], "--timeout=2s"])
    assert timed_out.returncode == 1 and "timed out" in timed_out.stderr
    at_once = kubectl([*[a.replace("=NodeBootstrapped", "=NodeBootstrapped=False")
                         for a in wait[:-1]], "--timeout=10s"])
    assert at_once.returncode == 0 and "condition met" in at_once.stdout
