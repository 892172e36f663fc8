"""A bridge without members (a host-only bridge: VMs or containers join it later) is
rendered by both renderers; netplan's file lists no interfaces."""

from __future__ import annotations

import yaml

from agent.phases.network.model import build_plan
from agent.phases.network.render import NETPLAN_FILE, render_netplan, render_networkd
from tests.unit.network.netconfig import network_spec

EMPTY_BRIDGE = {"interfaces": [{"name": "br0", "type": "bridge", "bridge": {"members": []},
                                "addresses": [{"static": "192.0.2.10/24"}]}]}


def test_a_bridge_without_members_is_rendered_for_netplan() -> None:
    doc = yaml.safe_load(render_netplan(build_plan(network_spec(EMPTY_BRIDGE)))[NETPLAN_FILE])
    bridge = doc["network"]["bridges"]["br0"]
    assert bridge["interfaces"] == []
    assert bridge["addresses"] == ["192.0.2.10/24"]


def test_a_bridge_without_members_is_rendered_for_networkd() -> None:
    files = render_networkd(build_plan(network_spec(EMPTY_BRIDGE)))
    assert "Kind=bridge" in files["/etc/systemd/network/10-machine-agent-br0.netdev"]
    assert "Address=192.0.2.10/24" in files["/etc/systemd/network/10-machine-agent-br0.network"]
