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
