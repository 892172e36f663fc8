"""An interface matched by MAC address is the NIC whose permanent address it is, never a
virtual link that carries the same address as its current one (a bridge or bond takes a
member's address, a VLAN its parent's), as networkd's PermanentMACAddress= and netplan's
match.macaddress mean it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.netlink.observe import LinkState, Observed
from agent.phases.network.match import resolve_names
from agent.phases.network.model import build_plan
from tests.unit.network.netconfig import network_spec

NIC_MAC = "52:54:00:12:34:56"


def link(index: int, name: str, kind: str | None, *, perm: str | None = None,
         master: int | None = None, parent: int | None = None) -> LinkState:
    return LinkState(index, name, kind, NIC_MAC, 1500, True, master, parent, perm)


NIC = link(2, "ens3", None, perm=NIC_MAC, master=3)
BRIDGE = link(3, "br0", "bridge")
VLAN = link(4, "ens3.100", "vlan", parent=2)


def observed(*links: LinkState) -> Observed:
    return Observed(links, frozenset(), frozenset())


def names(network: dict[str, object], now: Observed, tmp_path: Path) -> dict[str, str]:
    return resolve_names(Host(tmp_path, read_only=True), build_plan(network_spec(network)),
                         now)


def test_mac_matches_the_nic_not_the_bridge_and_vlan_carrying_its_address(
        tmp_path: Path) -> None:
    network = {"interfaces": [
        {"name": "uplink", "match": {"macAddress": NIC_MAC.upper()}},
        {"name": "br0", "type": "bridge", "bridge": {"members": ["uplink"]}},
        {"name": "ens3.100", "type": "vlan", "vlan": {"id": 100, "parent": "uplink"}}]}
    found = names(network, observed(NIC, BRIDGE, VLAN), tmp_path)
    assert found == {"uplink": "ens3", "br0": "br0", "ens3.100": "ens3.100"}


def test_a_link_with_the_address_only_as_its_current_one_does_not_match(
        tmp_path: Path) -> None:
    network = {"interfaces": [{"name": "uplink", "match": {"macAddress": NIC_MAC}}]}
    with pytest.raises(PermanentError) as info:
        names(network, observed(BRIDGE, VLAN), tmp_path)
    assert info.value.reason == Reason.InterfaceNotFound
    assert f"no link matches permanent MAC address {NIC_MAC}" in info.value.message
    assert info.value.hint is not None and "br0, ens3.100" in info.value.hint


def test_two_nics_with_one_permanent_address_are_ambiguous(tmp_path: Path) -> None:
    twin = link(5, "ens4", None, perm=NIC_MAC)
    network = {"interfaces": [{"name": "uplink", "match": {"macAddress": NIC_MAC}}]}
    with pytest.raises(PermanentError) as info:
        names(network, observed(NIC, twin), tmp_path)
    assert "2 links (ens3, ens4) match" in info.value.message


def test_a_vlan_on_a_nic_renamed_in_the_same_run_is_made_on_it_before_the_rename(
        tmp_path: Path) -> None:
    from agent.phases.network.apply import forward

    plan = build_plan(network_spec({"interfaces": [
        {"name": "uplink", "match": {"macAddress": NIC_MAC}, "rename": True},
        {"name": "uplink.7", "type": "vlan", "vlan": {"id": 7, "parent": "uplink"}}]}))
    nic = link(2, "ens3", None, perm=NIC_MAC)
    now = observed(nic)
    diff = forward(plan, now, resolve_names(Host(tmp_path, read_only=True), plan, now))
    assert [str(op) for op in diff.links[:3]] == [
        "create vlan uplink.7", "set ens3 down to rename it", "rename ens3 to uplink"]
    assert dict(diff.links[0].params)["parent"] == "ens3"  # its index, kept by the rename


def test_a_nic_without_a_permanent_address_is_not_matched_and_the_fix_is_named(
        tmp_path: Path) -> None:
    # decided: the live apply matches what the files say (PermanentMACAddress=), so a veth
    # found by its current MAC now would be lost by networkd after a reboot
    veth = LinkState(7, "veth0", "veth", NIC_MAC, 1500, True, None, None, None)
    network = {"interfaces": [{"name": "uplink", "match": {"macAddress": NIC_MAC}}]}
    with pytest.raises(PermanentError) as info:
        names(network, observed(veth), tmp_path)
    assert f"no link matches permanent MAC address {NIC_MAC}" in info.value.message
    assert info.value.hint is not None
    assert "veth0 carry" in info.value.hint and "no permanent MAC address" in info.value.hint
    assert "match such a link by name (match.name)" in info.value.hint
