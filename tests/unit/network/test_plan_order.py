"""The network plan puts every link after the link it rides on, whatever the order of
the configuration: the kernel needs a VLAN's or macvlan's parent to exist first."""

from __future__ import annotations

from agent.phases.network.model import build_plan
from tests.unit.network.netconfig import network_spec


def test_links_come_after_their_parents_however_they_are_listed() -> None:
    spec = network_spec({"interfaces": [
        {"name": "m0", "type": "macvlan", "macvlan": {"parent": "v5"}},
        {"name": "v5", "type": "vlan", "vlan": {"id": 5, "parent": "eth0"}},
        {"name": "eth1"},
        {"name": "eth0"}]})
    assert [link.name for link in build_plan(spec).links] == ["eth1", "eth0", "v5", "m0"]
