"""Every `--fault` of the demo, from pytest: the Machine ends with the right reason on the
right condition, and the node is clean (no half-applied address, no kubelet.conf)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from machine_agent_sandbox.faults import CATALOGUE
from machine_agent_sandbox.sandbox import Features, Sandbox

from tests.e2e.conftest import data_addresses

pytestmark = pytest.mark.allow_processes

IPAM_MISSING = not Features.detect().ipam


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.xfail(
        IPAM_MISSING and fault.needs_ipam, strict=True,
        reason="needs the `capi` IPAM plugin (branch ipam), not in this build"))
    for name, fault in CATALOGUE.items()])
def test_fault_ends_with_its_reason_and_a_clean_node(
        name: str, bring_up: Callable[[int], Sandbox]) -> None:
    fault = CATALOGUE[name]
    assert not (fault.needs_ipam and IPAM_MISSING), "the sandbox cannot arrange this fault"
    box = bring_up(1)
    (node,) = box.nodes
    fault.arrange(box)
    code, lines = node.run("run")
    assert code in (1, 3), "\n".join(lines)  # permanent, or temporary with retries spent
    conditions = box.conditions(node)
    failed = conditions[fault.condition]
    assert (failed["status"], failed["reason"]) == ("False", str(fault.reason)), failed
    summary = conditions["NodeBootstrapped"]
    assert (summary["status"], summary["reason"]) == ("False", str(fault.reason))
    assert not node.joined
    assert not (node.root / "run/cluster-api/bootstrap-success.complete").exists()
    addresses = data_addresses(box, node)
    if fault.address_kept:
        assert addresses == ["192.0.2.10/24"]
    else:  # rolled back or never added: nothing half-applied
        assert addresses == []
        assert box.network.ip("-n", node.netns, "route", "show", "default") == ""
    later = [c for c in ("NetworkReady", "TimeSynchronized", "NodeJoined", "CNIReady")]
    for kind in later[later.index(fault.condition) + 1:]:
        assert conditions[kind]["reason"] == "Pending", conditions[kind]
