"""The e2e suite drives the demo's sandbox (machine_agent_sandbox) from pytest: real namespaces,
chronyd, the management API stand-in as a process, the kubeadm stand-in, and the real
agent as a separate process per node with that node's view.

With MACHINE_AGENT_TEST_KUBECONFIG (an admin kubeconfig; the CAPI and IPAM CRDs
installed) the sandboxes use that API server in place of the stand-in (see
machine_agent_sandbox/external.py). No test needs a stand-in-only hook: what a test counts
or faults, it does through the fault proxy (machine_agent_sandbox.testkit.sandboxproxy).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from machine_agent_sandbox.netns import DATA_LINK
from machine_agent_sandbox.node import Node
from machine_agent_sandbox.sandbox import Sandbox

from agent.phases import registry

PHASE_CONDITIONS = registry.conditions()
"""The conditions the phases set, from the registry."""
_EFFECT = re.compile(r" effect \d+: (.*)$")
BOOKKEEPING = ("write /var/lib/machine-agent/", "mkdir /var/lib/machine-agent",
               "write /run/machine-agent/")
"""The journal and the status file, and the management CA the client materialises at each
start under /run: rewritten on every run by design."""
EXTERNAL = os.environ.get("MACHINE_AGENT_TEST_KUBECONFIG", "")


@pytest.fixture
def bring_up() -> Iterator[Callable[[int], Sandbox]]:
    """Sandboxes for the test, each torn down afterwards (even when the test fails)."""
    external = Path(EXTERNAL) if EXTERNAL else None
    with contextlib.ExitStack() as stack:
        yield lambda nodes=1: stack.enter_context(Sandbox.up(nodes, external=external))


def effects(lines: list[str]) -> list[str]:
    """The side effects a `--log-level debug` run reports, bookkeeping aside."""
    found = [m.group(1) for line in lines if (m := _EFFECT.search(line))]
    return [e for e in found if not e.startswith(BOOKKEEPING)]


def data_addresses(box: Sandbox, node: Node) -> list[str]:
    return box.network.node_addresses(node.netns, DATA_LINK)


def assert_bootstrapped(box: Sandbox, node: Node) -> None:
    conditions = box.conditions(node)
    for kind in (*PHASE_CONDITIONS, "NodeBootstrapped"):
        assert conditions[kind]["status"] == "True", (kind, conditions[kind])
    assert conditions["Ready"]["reason"] == "NotReady"  # CAPI's own condition untouched
    assert node.joined
    # the Node on the workload cluster: registered by its kubelet, named in NodeJoined,
    # Ready once the CNI list was in place, and that reported as the agent's own type
    assert conditions["NodeJoined"]["message"].endswith(f"; Node {node.name} registered")
    registered = box.workload.node(node.name)
    assert registered is not None
    ready = next(c for c in registered["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")
    reported = conditions["WorkloadNodeReady"]
    assert (reported["status"], reported["reason"]) == ("True", "KubeletReady")
    assert reported["message"] == (f"Node {node.name} is Ready (KubeletReady): kubelet is "
                                   "posting ready status")
