"""A sandbox node bootstrapped with its data address from the real Nautobot (the test
server tests/setup.sh starts): the whole bootstrap as a user runs it, the address Nautobot
allocated on the node's interface and recorded there with the node's claim key and name,
and given back by `release-addresses`."""

from __future__ import annotations

from pathlib import Path

import pytest
from machine_agent_sandbox.cluster import POOL
from machine_agent_sandbox.node import RestIPAM
from machine_agent_sandbox.sandbox import Sandbox

from agent.ipam.nautobot import CLAIM_FIELD
from tests.e2e.conftest import assert_bootstrapped, data_addresses
from tests.integration.ipam.conftest import nautobot as nautobot  # the fixture
from tests.integration.nautobot.world import Nautobot

pytestmark = pytest.mark.allow_processes
TOKEN_FILE = "/etc/machine-agent/nautobot.token"


def claimed(nautobot: Nautobot) -> list[dict[str, object]]:
    return [r for r in nautobot.addresses() if (r.get("custom_fields") or {}).get(CLAIM_FIELD)]


def test_a_node_bootstraps_with_its_address_from_nautobot(nautobot: Nautobot,
                                                         tmp_path: Path) -> None:
    ipam = RestIPAM("nautobot", {"url": nautobot.url, "tokenFile": TOKEN_FILE,
                                 "timeout": "30s", "pools": {POOL: {"prefix": "192.0.2.0/24"}}},
                    nautobot.token, TOKEN_FILE)
    with Sandbox.up(1, ipam=ipam) as box:
        (node,) = box.nodes
        code, lines = node.run("run")
        assert code == 0, "\n".join(lines)
        assert_bootstrapped(box, node)
        (row,) = claimed(nautobot)
        address = str(row["address"])
        assert data_addresses(box, node) == [address]
        uid = box.admin.machine(node.name)["metadata"]["uid"]
        custom = row["custom_fields"]
        assert isinstance(custom, dict)
        assert custom[CLAIM_FIELD] == f"{uid}/eth0/ipv4"  # this Machine's, not its name's
        network = node.status()["phases"]["network"]["result"]
        assert [c["address"] for c in network["claimed"]] == [address]
        assert address != "192.0.2.1/24"  # the gateway, reserved by the plugin
        assert str(row["dns_name"]) == f"{node.name}.demo.example.net"
        assert node.name in str(row["description"])
        route = box.network.ip("-n", node.netns, "route", "show", "default")
        assert route.startswith("default via 192.0.2.1 dev eth0")

        code, lines = node.run("release-addresses")
        assert code == 0, "\n".join(lines)
        assert claimed(nautobot) == []
