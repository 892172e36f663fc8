"""`spec.network` validation: every mistake reported with its path; hostile values refused
before they can reach a file, a template or a netlink message."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.network.netconfig import network_errors, network_spec


def eth(name: str = "eth0", **extra: Any) -> dict[str, Any]:
    return {"name": name, **extra}


def test_existing_minimal_keys_keep_working() -> None:
    spec = network_spec({"renderer": "networkd", "hostname": "w.example.net",
                         "interfaces": [eth(gateway="192.0.2.1", mtu=9000,
                                            addresses=[{"static": "192.0.2.10/24"}])]})
    assert spec.interfaces[0].static_addresses[0].ip.exploded == "192.0.2.10"


@pytest.mark.parametrize("bad", ["eth0\nAddress=203.0.113.66/24", "eth0\n", 'eth"0', "eth#0",
                                 "eth;0", "eth0/1", "eth 0", "", "a-very-long-interface-name"])
def test_hostile_interface_names_are_refused(bad: str) -> None:
    errors = network_errors({"interfaces": [eth(bad)]})
    assert any(e.startswith("spec.network.interfaces[0].name:") for e in errors), errors


@pytest.mark.parametrize("bad", ["host\nname", "host\n", "host;reboot", "host#x", 'host"x', "a/b",
                                 "-leading.example"])
def test_hostile_host_names_and_search_domains_are_refused(bad: str) -> None:
    errors = network_errors({"hostname": bad, "dns": {"search": [bad]}})
    assert any(e.startswith("spec.network.hostname:") for e in errors)
    assert any(e.startswith("spec.network.dns.search[0]:") for e in errors)


@pytest.mark.parametrize("bad", ["bond0\n[Network]", "x;y", "x#y"])
def test_hostile_member_parent_and_driver_values_are_refused(bad: str) -> None:
    errors = network_errors({"interfaces": [
        eth("eth0", match={"driver": bad}),
        eth("br0", type="bridge", bridge={"members": [bad]}),
        eth("v1", type="vlan", vlan={"id": 5, "parent": bad}),
        eth("m1", type="macvlan", macvlan={"parent": "eth0"}, mtu=1500)]})
    assert any("interfaces[0].match.driver:" in e for e in errors)
    assert any("interfaces[1].bridge.members[0]:" in e for e in errors)
    assert any("interfaces[2].vlan.parent:" in e for e in errors)


def test_every_cross_field_mistake_is_reported_at_once() -> None:
    errors = network_errors({"interfaces": [
        eth("eth0", gateway="198.51.100.1",
            addresses=[{"static": "192.0.2.10/24"}, {"static": "192.0.2.10/24"}]),
        eth("eth1", addresses=[{"static": "192.0.2.200/25"}]),
        eth("v10", type="vlan", mtu=9000, vlan={"id": 10, "parent": "eth0"}),
        eth("v11", type="vlan"),
        eth("bond0", type="bond", bond={"members": ["eth2", "eth3"]}),
        eth("br0", type="bridge", bridge={"members": ["eth2"]}),
        eth("eth2"), eth("eth3"),
        eth("eth0"),
    ]})
    expected = [
        "spec.network.interfaces[0].gateway: 198.51.100.1 is outside the interface's subnets",
        "spec.network.interfaces[0].addresses[1].static: 192.0.2.10 is also "
        "interfaces[0].addresses[0].static",
        "spec.network.interfaces[1].addresses[0].static: 192.0.2.128/25 overlaps 192.0.2.0/24",
        "spec.network.interfaces[2].mtu: 9000 is above the MTU of its parent eth0 (1500)",
        "spec.network.interfaces[3].vlan: is required for type vlan",
        "spec.network.interfaces[5].bridge.members[0]: eth2 is already a member of bond0",
        "spec.network.interfaces[8].name: eth0 is also interfaces[0]",
    ]
    for message in expected:
        assert any(e.startswith(message) for e in errors), (message, errors)


def test_address_gateway_and_route_families_are_checked() -> None:
    errors = network_errors({"interfaces": [eth(
        gateway="2001:db8::1", gateway6="2001:db8::2",
        addresses=[{"static": "192.0.2.0/24"}, {"static": "2001:db8::1/64"}],
        routes=[{"to": "default"}, {"to": "198.51.100.0/24", "via": "2001:db8::9"}])]})
    for message in ["interfaces[0].addresses[0].static: 192.0.2.0 is the network",
                    "interfaces[0].gateway6: two IPv6 gateways",
                    "interfaces[0].gateway: 2001:db8::1 is the interface's own address",
                    "interfaces[0].routes[0].via: a default route needs a next hop",
                    "interfaces[0].routes[1].via: next hop 2001:db8::9 is not in the family"]:
        assert any(message in e for e in errors), (message, errors)


def test_malformed_route_values_are_refused() -> None:
    errors = network_errors({"interfaces": [eth(routes=[
        {"to": "198.51.100.0/33"}, {"to": "10.0.0.0/8", "table": 255},
        {"to": "192.0.2.1/24"}])]})
    for message in ["interfaces[0].routes[0].to:", "interfaces[0].routes[1].table:",
                    "interfaces[0].routes[2].to:"]:
        assert any(message in e for e in errors), (message, errors)


def test_match_is_one_key_and_only_for_ethernet() -> None:
    errors = network_errors({"interfaces": [
        eth(match={"name": "eth0", "driver": "veth"}),
        eth("br0", type="bridge", match={"name": "br0"})]})
    assert any("interfaces[0].match: give exactly one of name, macAddress or driver" in e
               for e in errors)
    assert any("interfaces[1].match: only ethernet interfaces are matched" in e
               for e in errors)


def test_renderer_and_dns_backend_limits() -> None:
    errors = network_errors({
        "renderer": "netplan",
        "dns": {"backend": "resolv.conf",
                "nameservers": ["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"]},
        "interfaces": [eth(), eth("m0", type="macvlan", macvlan={"parent": "eth0"})]})
    assert any("interfaces[1].type: netplan cannot describe a macvlan" in e for e in errors)
    assert any("dns.nameservers: 4 servers" in e for e in errors)


@pytest.mark.parametrize("endpoint", ["192.0.2.1:6443", "api.example.net:443",
                                      "[2001:db8::1]:6443"])
def test_management_endpoint_forms(endpoint: str) -> None:
    assert network_spec({"verify": {"managementEndpoint": endpoint}})


@pytest.mark.parametrize("endpoint", ["api.example.net", "192.0.2.1:0", "2001:db8::1:443",
                                      "a b:80", "host\n:80", "[192.0.2.1]:80"])
def test_malformed_management_endpoint_is_refused(endpoint: str) -> None:
    errors = network_errors({"verify": {"managementEndpoint": endpoint}})
    assert any(e.startswith("spec.network.verify.managementEndpoint:") for e in errors)


def test_a_gateway_off_link_names_each_subnet_with_the_address_it_comes_from() -> None:
    errors = network_errors({"interfaces": [
        eth("eth0", gateway="2001:db8::1", addresses=[{"static": "0::10/3"}])]})
    assert any(e.startswith("spec.network.interfaces[0].gateway: 2001:db8::1 is outside the "
                            "interface's subnets (::/3 of addresses[0].static 0::10/3)")
               for e in errors), errors


def test_an_address_no_interface_can_hold_is_refused() -> None:
    errors = network_errors({"interfaces": [eth("eth0", addresses=[
        {"static": "::/64"}, {"static": "ff02::1/64"}, {"static": "224.0.0.5/24"},
        {"static": "255.255.255.255/32"}, {"static": "0.0.0.0/8"}])]})
    for j, ip in enumerate(("::", "ff02::1", "224.0.0.5", "255.255.255.255", "0.0.0.0")):
        assert f"spec.network.interfaces[0].addresses[{j}].static: {ip} cannot be an " \
               "interface's address (unspecified, multicast or broadcast)" in "\n".join(
                   errors), (ip, errors)
