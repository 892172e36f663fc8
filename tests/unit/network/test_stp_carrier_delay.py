"""How much longer the live apply waits for DAD and the gateway on an STP bridge: its
ports listen and learn for a forward delay each before the bridge has carrier
(test_real_networkd proves the wait on a real STP bridge against networkd)."""

from __future__ import annotations

from agent.phases.network.model import NetworkPlan, build_plan
from tests.unit.network.netconfig import network_spec


def plan_of(bridge: dict[str, object]) -> NetworkPlan:
    return build_plan(network_spec({"interfaces": [
        {"name": "eth0"}, {"name": "eth1"},
        {"name": "br0", "type": "bridge", "bridge": {"members": ["eth0"], **bridge}}]}))


def test_an_stp_bridge_waits_two_forward_delays() -> None:
    assert plan_of({"stp": True, "forwardDelay": 4}).carrier_delay(["br0"]) == 8.0
    assert plan_of({"stp": True}).carrier_delay(["br0", "eth1"]) == 30.0  # kernel's 15 s


def test_no_wait_without_stp_or_on_other_links() -> None:
    assert plan_of({"stp": False}).carrier_delay(["br0"]) == 0.0
    assert plan_of({"stp": True}).carrier_delay(["eth1"]) == 0.0
