"""Keys netplan's networkd renderer takes, carried out: `optional`, `link-local`,
`ipv6-privacy`, booleans as netplan reads them, ConfigureWithoutCarrier on bonds and
VLANs, UseMTU with DHCP; each written by both renderers as netplan writes it."""

from __future__ import annotations

from typing import Any

import yaml

from agent.config.netconfig_v2 import translate
from agent.phases.network.model import build_plan
from agent.phases.network.render import NETPLAN_FILE, render_netplan, render_networkd
from tests.unit.network.netconfig import network_errors, network_spec

ND = "/etc/systemd/network/10-machine-agent-"


def v2(ethernets: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"networkConfig": {"version": 2, "ethernets": ethernets, **more}}


def test_optional_link_local_and_ipv6_privacy_are_written_by_both_renderers() -> None:
    spec = network_spec(v2({"eth0": {"addresses": ["192.0.2.10/24"], "optional": True,
                                     "link-local": [], "ipv6-privacy": True}}))
    plan = build_plan(spec)
    network = render_networkd(plan)[f"{ND}eth0.network"]
    assert "[Link]\nRequiredForOnline=no\n" in network
    assert "LinkLocalAddressing=no\n" in network and "IPv6PrivacyExtensions=yes\n" in network
    entry = yaml.safe_load(render_netplan(plan)[NETPLAN_FILE])["network"]["ethernets"]["eth0"]
    assert (entry["optional"], entry["link-local"], entry["ipv6-privacy"]) == (True, [], True)


def test_booleans_are_read_as_netplan_reads_them() -> None:
    spec = network_spec(v2({"eth0": {"dhcp4": "yes", "optional": "on", "accept-ra": "No"}}))
    (iface,) = spec.interfaces
    assert [a.dhcp for a in iface.addresses] == ["ipv4"]
    assert iface.optional is True and iface.accept_ra is False
    errors = network_errors(v2({"eth0": {"dhcp4": "maybe"}}))
    assert errors and "networkConfig.ethernets.eth0.dhcp4" in errors[0]


def test_ipv4_link_local_is_refused_with_the_reason() -> None:
    (error,) = network_errors(v2({"eth0": {"link-local": ["ipv4", "ipv6"]}}))
    assert error.startswith("spec.network.networkConfig.ethernets.eth0.link-local: ipv4 is "
                            "refused")
    assert "IPv4LL client" in error


def test_dhcp_takes_the_mtu_the_server_offers_as_netplan_writes_it() -> None:
    plan = build_plan(network_spec({"interfaces": [
        {"name": "eth0", "addresses": [{"dhcp": "ipv4"}]}]}))
    assert "[DHCPv4]\nUseMTU=true\n" in render_networkd(plan)[f"{ND}eth0.network"]


def test_bonds_and_vlans_are_configured_without_carrier_as_netplan_writes_it() -> None:
    plan = build_plan(network_spec({"interfaces": [
        {"name": "eth0"},
        {"name": "bond0", "type": "bond", "bond": {"members": ["eth0"]}},
        {"name": "v5", "type": "vlan", "vlan": {"id": 5, "parent": "bond0"}}]}))
    files = render_networkd(plan)
    for name in ("bond0", "v5"):
        assert "ConfigureWithoutCarrier=yes\n" in files[f"{ND}{name}.network"]
    assert "ConfigureWithoutCarrier" not in files[f"{ND}eth0.network"]


def test_v2_keys_translate_to_their_native_fields() -> None:
    done = translate({"version": 2, "ethernets": {"eth0": {
        "optional": "true", "link-local": ["ipv6"], "ipv6-privacy": False}}})
    assert done.problems == []
    (iface,) = done.interfaces
    assert (iface["optional"], iface["linkLocal"], iface["ipv6Privacy"]) == (
        True, ["ipv6"], False)


BOND_AND_BRIDGE = {"version": 2, "ethernets": {"eth0": {}, "eth1": {}},
                   "bonds": {"bond0": {"interfaces": ["eth0"], "parameters": {
                       "mode": "active-backup", "mii-monitor-interval": 100,
                       "up-delay": "200ms", "down-delay": 100, "min-links": 1}}},
                   "bridges": {"br0": {"interfaces": ["eth1"], "parameters": {
                       "stp": "yes", "priority": 4096, "hello-time": "3s", "max-age": 12}}}}


def test_bond_delays_and_bridge_stp_times_are_written_by_both_renderers() -> None:
    plan = build_plan(network_spec({"networkConfig": BOND_AND_BRIDGE}))
    files = render_networkd(plan)
    bond = files[f"{ND}bond0.netdev"]
    assert "UpDelaySec=200ms\n" in bond and "DownDelaySec=100ms\n" in bond
    assert "MinLinks=1\n" in bond
    bridge = files[f"{ND}br0.netdev"]
    assert "STP=yes\n" in bridge and "HelloTimeSec=3\n" in bridge
    assert "MaxAgeSec=12\n" in bridge and "Priority=4096\n" in bridge
    doc = yaml.safe_load(render_netplan(plan)[NETPLAN_FILE])["network"]
    assert doc["bonds"]["bond0"]["parameters"].items() >= {
        "up-delay": 200, "down-delay": 100, "min-links": 1}.items()
    assert doc["bridges"]["br0"]["parameters"] == {
        "stp": True, "priority": 4096, "hello-time": 3, "max-age": 12}


def test_values_the_kernel_refuses_are_refused_by_their_v2_path() -> None:
    doc = {"version": 2, "ethernets": {"eth0": {}, "eth1": {}},
           "bonds": {"bond0": {"interfaces": ["eth0"], "parameters": {
               "mii-monitor-interval": 100, "up-delay": 150}}},
           "bridges": {"br0": {"interfaces": ["eth1"], "parameters": {"hello-time": 11}}}}
    errors = network_errors({"networkConfig": doc})
    assert len(errors) == 2, errors
    assert any(e.startswith("spec.network.networkConfig.bonds.bond0.parameters.up-delay: "
                            "150 is not a multiple of miimon") for e in errors), errors
    assert any(e.startswith("spec.network.networkConfig.bridges.br0.parameters.hello-time: "
                            "11 is outside 1-10") for e in errors), errors


def test_a_name_glob_is_taken_and_written_by_both_renderers() -> None:
    spec = network_spec(v2({"nics": {"match": {"name": "en*"}, "dhcp4": True}}))
    plan = build_plan(spec)
    assert "\n[Match]\nName=en*\n" in render_networkd(plan)[f"{ND}nics.network"]
    entry = yaml.safe_load(render_netplan(plan)[NETPLAN_FILE])["network"]["ethernets"]["nics"]
    assert entry["match"] == {"name": "en*"}
    (error,) = network_errors(v2({"nics": {"match": {"name": "en*/x"}}}))
    assert "is not a valid interface name or glob" in error


def test_an_address_with_lifetime_forever_is_the_address_and_other_options_are_refused(
        ) -> None:
    spec = network_spec(v2({"eth0": {"addresses": [
        {"192.0.2.10/24": {"lifetime": "forever"}}, "2001:db8::10/64"]}}))
    assert [a.static for a in spec.interfaces[0].addresses] == [
        "192.0.2.10/24", "2001:db8::10/64"]
    (error,) = network_errors(v2({"eth0": {"addresses": [
        {"192.0.2.10/24": {"lifetime": 0, "label": "eth0:1"}}]}}))
    assert error.startswith("spec.network.networkConfig.ethernets.eth0.addresses[0]: only "
                            "addresses as text")
    assert "`lifetime: 0` (deprecated at once) and `label` are not set live" in error
