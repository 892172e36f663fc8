"""What the kernel or networkd would refuse (or silently get wrong) is refused when the
configuration is read, naming the field: before, each was accepted and ended live in an
InternalError, or with --root in broken files and an exit code of 0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.errors import PermanentError
from agent.host import Host
from agent.netlink.observe import LinkState, Observed
from agent.phases.network.match import resolve_names
from agent.phases.network.model import build_plan
from tests.unit.network.netconfig import network_errors, network_spec


def one_error(doc: dict[str, Any]) -> str:
    errors = network_errors(doc)
    assert len(errors) == 1, errors
    return errors[0]


def test_two_entries_with_one_mac_address_are_refused() -> None:
    error = one_error({"interfaces": [
        {"name": "eth0", "match": {"macAddress": "52:54:00:00:00:01"},
         "addresses": [{"static": "192.0.2.10/24"}]},
        {"name": "uplink", "match": {"macAddress": "52:54:00:00:00:01"},
         "addresses": [{"static": "198.51.100.10/24"}]}]})
    assert error.startswith("spec.network.interfaces[1].match.macAddress: ")
    assert "as interfaces[0] (eth0) does" in error


def test_an_entry_matching_the_name_of_another_is_refused() -> None:
    error = one_error({"interfaces": [
        {"name": "eth0", "addresses": [{"static": "192.0.2.10/24"}]},
        {"name": "uplink", "match": {"name": "eth0"},
         "addresses": [{"static": "198.51.100.10/24"}]}]})
    assert error.startswith("spec.network.interfaces[1].match.name: ")


def test_one_by_mac_and_one_by_name_on_the_same_link_is_refused_when_resolved(
        tmp_path: Path) -> None:
    mac = "52:54:00:00:00:01"
    spec = network_spec({"interfaces": [
        {"name": "eth0", "addresses": [{"static": "192.0.2.10/24"}]},
        {"name": "uplink", "match": {"macAddress": mac},
         "addresses": [{"static": "198.51.100.10/24"}]}]})
    nic = LinkState(2, "eth0", None, mac, 1500, True, None, None, mac)
    with pytest.raises(PermanentError) as info:
        resolve_names(Host(tmp_path, read_only=True), build_plan(spec),
                      Observed((nic,), frozenset(), frozenset()))
    assert "interfaces eth0 and uplink both select link eth0" in info.value.message


def test_ipv6_route_via_a_gateway_on_an_interface_without_ipv6_is_refused() -> None:
    error = one_error({"interfaces": [{
        "name": "eth0", "addresses": [{"static": "192.0.2.10/24"}],
        "routes": [{"to": "2001:db8:1::/48", "via": "2001:db8::1"}]}]})
    assert error.startswith("spec.network.interfaces[0].routes[0].via: 2001:db8::1 cannot "
                            "be reached: the interface has no IPv6 address")


def test_ipv6_next_hops_that_are_reachable_are_accepted() -> None:
    assert network_errors({"interfaces": [
        {"name": "eth0", "addresses": [{"static": "192.0.2.10/24"}],
         "routes": [{"to": "2001:db8:1::/48", "via": "fe80::1"}]},  # link-local
        {"name": "eth1", "addresses": [{"ipam": {"plugin": "static", "pool": "v6",
                                                 "family": "ipv6"}}],
         "gateway6": "2001:db8::1"}]}) == []  # the address comes from IPAM
    # on its own: with eth1's it would be a second IPv6 default route of one metric
    assert network_errors({"interfaces": [
        {"name": "eth2", "addresses": [{"dhcp": "ipv6"}], "gateway": "2001:db8:2::1"}]}) == []


@pytest.mark.parametrize(("gateway", "which"), [("192.0.2.255", "broadcast"),
                                                ("192.0.2.0", "network")])
def test_gateway_on_the_network_or_broadcast_address_is_refused(gateway: str,
                                                                which: str) -> None:
    error = one_error({"interfaces": [{"name": "eth0", "gateway": gateway,
                                       "addresses": [{"static": "192.0.2.10/24"}]}]})
    assert error == (f"spec.network.interfaces[0].gateway: {gateway} is the {which} address "
                     "of 192.0.2.0/24 (addresses[0].static 192.0.2.10/24) (a gateway is a "
                     "host address inside the subnet)")


def test_mtu_below_1280_with_ipv6_is_refused() -> None:
    error = one_error({"interfaces": [{"name": "eth0", "mtu": 1200,
                                       "addresses": [{"static": "2001:db8::10/64"}]}]})
    assert error.startswith("spec.network.interfaces[0].mtu: 1200 is below 1280")
    assert network_errors({"interfaces": [{"name": "eth0", "mtu": 1200, "addresses": [
        {"static": "192.0.2.10/24"}]}]}) == []


def test_vlan_inheriting_a_parent_mtu_below_1280_with_ipv6_is_refused() -> None:
    error = one_error({"interfaces": [
        {"name": "eth0", "mtu": 1000},
        {"name": "v5", "type": "vlan", "vlan": {"id": 5, "parent": "eth0"},
         "addresses": [{"dhcp": "ipv6"}]}]})
    assert error.startswith("spec.network.interfaces[1].mtu: the vlan takes the MTU of eth0")


@pytest.mark.parametrize("name", ["eth0:1", "a/b", "eth 0", ".", "..", "123", "all",
                                  "default", "sixteen-chars-xx", "eth0%d"])
def test_interface_names_the_kernel_or_systemd_refuse_are_refused(name: str) -> None:
    error = one_error({"interfaces": [{"name": name}]})
    assert error.startswith("spec.network.interfaces[0].name: ")
    assert "is not a valid interface name" in error


@pytest.mark.parametrize("name", ["eth0", "bond0.100", "br-ex", "enp0s31f6", "vlan@5",
                                  "fifteen-chars-x"])
def test_ordinary_interface_names_are_accepted(name: str) -> None:
    assert network_errors({"interfaces": [{"name": name}]}) == []


def test_bond_options_the_kernel_refuses_in_the_mode_are_refused() -> None:
    errors = network_errors({"interfaces": [
        {"name": "eth0"},
        {"name": "bond0", "type": "bond", "bond": {
            "members": ["eth0"], "mode": "balance-rr", "lacpRate": "fast",
            "primary": "eth0"}}]})
    assert sorted(errors) == [
        "spec.network.interfaces[1].bond.lacpRate: has no meaning in mode balance-rr "
        "(use mode 802.3ad, or drop lacpRate)",
        "spec.network.interfaces[1].bond.primary: has no meaning in mode balance-rr (use "
        "mode active-backup, balance-tlb or balance-alb, or drop primary)"]


def test_forward_delay_out_of_the_stp_range_is_refused() -> None:
    error = one_error({"interfaces": [
        {"name": "eth0"},
        {"name": "br0", "type": "bridge",
         "bridge": {"members": ["eth0"], "stp": True, "forwardDelay": 1}}]})
    assert error.startswith("spec.network.interfaces[1].bridge.forwardDelay: 1 is outside 2-30")


def test_a_bond_member_mtu_other_than_the_bonds_is_refused() -> None:
    # enslaving gives the member the bond's MTU: 9000 on the NICs and none on the bond
    # would be 1500 everywhere after the bond is made
    error = one_error({"interfaces": [
        {"name": "eth0", "mtu": 9000},
        {"name": "bond0", "type": "bond", "bond": {"members": ["eth0"]}}]})
    assert error == ("spec.network.interfaces[0].mtu: 9000 differs from the MTU of its bond "
                     "bond0 (1500): the kernel gives a bond's members the bond's MTU (give "
                     "bond0 mtu 9000, or drop this one)")


def test_a_bridge_mtu_above_a_members_is_refused() -> None:
    error = one_error({"interfaces": [
        {"name": "eth0"},
        {"name": "br0", "type": "bridge", "mtu": 9000, "bridge": {"members": ["eth0"]}}]})
    assert error.startswith("spec.network.interfaces[1].mtu: 9000 is above the MTU of its "
                            "member eth0 (1500)")


def test_a_bridge_mtu_below_a_members_is_refused() -> None:
    # networkd sets it before the port joins and the kernel then moves it to the port's:
    # 1280 live, 1500 after a reboot (test_real_networkd proves it on real networkd)
    error = one_error({"interfaces": [
        {"name": "eth0"},
        {"name": "br0", "type": "bridge", "mtu": 1280, "bridge": {"members": ["eth0"]}}]})
    assert error == ("spec.network.interfaces[1].mtu: 1280 is below the MTU of its member "
                     "eth0 (1500): a bridge takes its ports' MTU when they join (give eth0 "
                     "mtu 1280, or raise this one)")


def test_a_bridge_mtu_its_members_share_is_accepted() -> None:
    assert network_errors({"interfaces": [
        {"name": "eth0", "mtu": 1280},
        {"name": "br0", "type": "bridge", "mtu": 1280, "bridge": {"members": ["eth0"]}}]}) == []


def test_two_default_routes_of_one_family_table_and_metric_are_refused() -> None:
    error = one_error({"interfaces": [
        {"name": "eth0", "addresses": [{"static": "192.0.2.10/24"}], "gateway": "192.0.2.1"},
        {"name": "eth1", "addresses": [{"static": "198.51.100.10/24"}],
         "gateway": "198.51.100.1"}]})
    assert error == ("spec.network.interfaces[1].gateway: a second IPv4 default route in "
                     "table 254 with metric 0, as interfaces[0].gateway (give one of them "
                     "another metric or table, or drop it)")


def test_default_routes_apart_by_metric_table_or_family_are_accepted() -> None:
    assert network_errors({"interfaces": [
        {"name": "eth0", "addresses": [{"static": "192.0.2.10/24"},
                                       {"static": "2001:db8::10/64"}],
         "gateway": "192.0.2.1", "gateway6": "2001:db8::1"},
        {"name": "eth1", "addresses": [{"static": "198.51.100.10/24"}],
         "routes": [{"to": "default", "via": "198.51.100.1", "metric": 100},
                    {"to": "default", "via": "198.51.100.2", "table": 100}]}]}) == []


def test_a_macvlan_above_its_parents_mtu_is_refused() -> None:
    error = one_error({"interfaces": [
        {"name": "eth0"},
        {"name": "mv0", "type": "macvlan", "mtu": 9000, "macvlan": {"parent": "eth0"}}]})
    assert error.startswith("spec.network.interfaces[1].mtu: 9000 is above the MTU of its "
                            "parent eth0")


def test_an_802_1ad_vlan_with_the_netplan_renderer_is_refused() -> None:
    error = one_error({"renderer": "netplan", "interfaces": [
        {"name": "eth0"},
        {"name": "qinq", "type": "vlan",
         "vlan": {"id": 5, "parent": "eth0", "protocol": "802.1ad"}}]})
    assert error == ("spec.network.interfaces[1].vlan.protocol: netplan cannot describe an "
                     "802.1ad VLAN (use renderer networkd)")


def test_a_link_local_ipv6_gateway_beside_a_global_address_is_accepted() -> None:
    # netplan, networkd and the kernel take it: the router's fe80::1 is on every link
    assert network_errors({"interfaces": [{
        "name": "eth0", "addresses": [{"static": "2001:db8:28::2/64"}],
        "gateway6": "fe80::1",
        "routes": [{"to": "2001:db8:1::/48", "via": "fe80::2"}]}]}) == []
    error = one_error({"interfaces": [{"name": "eth0", "gateway6": "2001:db8:29::1",
                                       "addresses": [{"static": "2001:db8:28::2/64"}]}]})
    assert "2001:db8:29::1 is outside the interface's subnets" in error
