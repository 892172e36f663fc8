"""Several nodes bootstrapping at once against one management API stand-in: each gets
its own address, each Machine gets its own report."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from machine_agent_sandbox.sandbox import Sandbox

from tests.e2e.conftest import assert_bootstrapped, data_addresses

pytestmark = pytest.mark.allow_processes


@pytest.mark.parametrize("count", [2, 10])
def test_nodes_bootstrapping_at_once_get_distinct_addresses_and_all_report(
        count: int, bring_up: Callable[[int], Sandbox]) -> None:
    box = bring_up(count)
    agents = [node.start("run") for node in box.nodes]
    deadline = time.monotonic() + 120
    for node, agent in zip(box.nodes, agents, strict=True):
        out, _ = agent.communicate(timeout=max(1.0, deadline - time.monotonic()))
        assert agent.returncode == 0, f"{node.name}:\n{out}"
    addresses = [data_addresses(box, node) for node in box.nodes]
    assert all(len(a) == 1 for a in addresses), addresses
    assert len({a[0] for a in addresses}) == count
    for node in box.nodes:
        assert_bootstrapped(box, node)
    claims = box.admin.claims()
    if box.features.ipam:  # one claim per node, each with its own address
        assert len(claims) == count
        assert all(c.get("status", {}).get("addressRef") for c in claims)
    else:
        assert claims == []
