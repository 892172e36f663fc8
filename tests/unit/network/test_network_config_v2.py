"""cloud-init network-config v2 as `spec.network`'s input: accepted as it is (inline, from
a file, or the datasource's own from cloud-init's instance data), meaning what the same
network written in the agent's own terms means, and every error named by its v2 path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.config.sources import FileSource, load_config
from agent.errors import ConfigError
from agent.host import Host
from agent.phases.network.model import build_plan, ipam_refs
from agent.phases.network.render import render_netplan, render_networkd
from tests.unit.network.netconfig import network_errors, network_spec

ROOT = Path(__file__).parents[3]
EXAMPLE = ROOT / "examples" / "network-config" / "bond-vlan-bridge.yaml"
CORPUS = ROOT / "tests" / "integration" / "network" / "network-config-v2"
GOLDEN = Path(__file__).parent / "golden"


def v2(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def links_rendered(network: dict[str, Any]) -> dict[str, str]:
    plan = build_plan(network_spec(network))
    return {**render_networkd(plan), **render_netplan(plan)}


def test_the_golden_case_and_the_example_config_hold_the_example_file_as_it_is() -> None:
    golden = yaml.safe_load((GOLDEN / "v2-bond-vlan-bridge" / "input.yaml").read_text())
    assert golden["networkConfig"] == v2(EXAMPLE)
    config = yaml.safe_load((ROOT / "examples" / "network-config-v2.yaml").read_text())
    assert config["spec"]["network"]["networkConfig"] == v2(EXAMPLE)


def test_bond_vlan_bridge_dual_stack_routes_and_dns_are_carried_through() -> None:
    plan = build_plan(network_spec({"networkConfig": v2(EXAMPLE)}))
    bond, vlan, br0 = plan.link("bond0"), plan.link("bond0.100"), plan.link("br0")
    assert bond.bond is not None and (bond.bond.mode, bond.bond.lacp_rate,
                                      bond.bond.transmit_hash_policy, bond.bond.miimon) == (
        "802.3ad", "fast", "layer3+4", 100)
    assert [plan.link(n).master for n in ("eno1", "eno2", "eno3")] == ["bond0", "bond0",
                                                                       "br0"]
    assert (vlan.vlan_id, vlan.parent, vlan.mtu) == (100, "bond0", 1500)
    assert [str(a) for a in vlan.addresses] == ["198.51.100.30/24", "2001:db8:100::30/64"]
    assert [(r.dst, r.via, r.metric) for r in vlan.routes] == [
        ("0.0.0.0/0", "198.51.100.1", 100), ("::/0", "2001:db8:100::1", 100),
        ("203.0.113.0/24", "198.51.100.254", 50)]
    assert (vlan.nameservers, vlan.search) == (("198.51.100.53", "2001:db8:100::53"),
                                               ("prod.example.net",))
    assert (br0.stp, br0.forward_delay, br0.nameservers) == (True, 4, ("192.0.2.53",))
    assert plan.nameservers == ()  # per-link DNS stays the link's, never global


@pytest.mark.parametrize("case", sorted(p.stem for p in CORPUS.glob("*.yaml")))
def test_each_v2_of_the_corpus_renders_as_its_hand_written_twin(case: str) -> None:
    # tests/integration/network/test_netplan_differential.py holds each twin to what
    # cloud-init itself renders from the v2 file
    twin = yaml.safe_load((GOLDEN / case / "input.yaml").read_text())
    assert links_rendered({"networkConfig": v2(CORPUS / f"{case}.yaml")}) == \
        links_rendered(twin)


def broken(change: dict[str, Any]) -> list[str]:
    doc = v2(EXAMPLE)
    for path, value in change.items():
        *parents, last = path.split("/")
        node = doc["network"]
        for key in parents:
            node = node[key]
        node[last] = value
    return network_errors({"networkConfig": doc})


PREFIX = "spec.network.networkConfig.network."


@pytest.mark.parametrize(("change", "error"), [
    ({"bonds/bond0/parameters/mode": "lacp"},
     "bonds.bond0.parameters.mode: 'lacp' is not one of: balance-rr"),
    ({"bonds/bond0/parameters/lacp-rate": "medium"},
     "bonds.bond0.parameters.lacp-rate: 'medium' is not one of: slow, fast"),
    ({"bonds/bond0/parameters/up-delay": 150},
     "bonds.bond0.parameters.up-delay: 150 is not a multiple of miimon"),
    ({"bonds/bond0/parameters/ad-select": "bandwidth"},
     "bonds.bond0.parameters.ad-select: is not supported by machine-agent"),
    ({"bonds/bond0/interfaces": ["eno1", "eno9"]},
     "bonds.bond0.interfaces[1]: eno9 is not an interface entry"),
    ({"vlans/bond0.100/id": 5000}, "vlans.bond0.100.id: 5000 is not a VLAN id"),
    ({"vlans/bond0.100/link": "bond7"}, "vlans.bond0.100.link: bond7 is not an interface"),
    ({"vlans/bond0.100/routes": [{"to": "2001:db8:9::/48", "via": "2001:db8:9::1"}]},
     "vlans.bond0.100.routes[0].via: 2001:db8:9::1 is outside the interface's subnets"),
    ({"vlans/bond0.100/routes": [{"to": "default", "via": "198.51.100.255"}]},
     "vlans.bond0.100.routes[0].via: 198.51.100.255 is the broadcast address"),
    ({"bridges/br0/routes": [{"to": "10.0.0.0/8", "via": "192.0.2.1", "type": "blackhole"}]},
     "bridges.br0.routes[0].type: is not supported by machine-agent"),
    ({"bridges/br0/parameters/forward-delay": "4 seconds"},
     "bridges.br0.parameters.forward-delay: '4 seconds' is not a whole number of seconds"),
    ({"bridges/br0/addresses": [{"192.0.2.10/24": {"lifetime": 0}}]},
     "bridges.br0.addresses[0]: only addresses as text"),
    ({"bridges/br0/nameservers/addresses": ["dns.example.net"]},
     "bridges.br0.nameservers.addresses[0]: \"dns.example.net\" is not an IP address"),
    ({"ethernets/eno3/routing-policy": [{"from": "192.0.2.0/24", "table": 100}]},
     "ethernets.eno3.routing-policy: is not supported by machine-agent (routing rules"),
    ({"bridges/br0/mtu": 1200}, "bridges.br0.mtu: 1200 is below 1280"),
    ({"ethernets/eno1:0": {"dhcp4": True}},
     "ethernets.eno1:0: \"eno1:0\" is not a valid interface name"),
    ({"wifis": {"wlan0": {}}}, "wifis: is not supported by machine-agent (wifis cannot"),
])
def test_every_error_names_its_v2_path(change: dict[str, Any], error: str) -> None:
    errors = broken(change)
    assert any(e.startswith(PREFIX + error) for e in errors), errors


def test_match_and_set_name_become_a_renamed_entry_referred_to_by_its_new_name() -> None:
    spec = network_spec({"networkConfig": {"version": 2, "ethernets": {
        "nic0": {"match": {"macaddress": "52:54:00:00:00:0a"}, "set-name": "lan0"}},
        "vlans": {"v7": {"id": 7, "link": "nic0", "addresses": ["192.0.2.7/24"]}}}})
    lan0, v7 = spec.interfaces
    assert (lan0.name, lan0.rename, lan0.match and lan0.match.mac_address) == (
        "lan0", True, "52:54:00:00:00:0a")
    assert v7.vlan is not None and v7.vlan.parent == "lan0"


def test_dhcp_false_and_accept_ra_are_carried_through() -> None:
    spec = network_spec({"networkConfig": {"version": 2, "ethernets": {
        "eth0": {"dhcp4": False, "dhcp6": True, "accept-ra": True},
        "eth1": {"dhcp4": True, "dhcp6": False}}}})
    eth0, eth1 = build_plan(spec).links
    assert (eth0.dhcp4, eth0.dhcp6, eth0.accept_ra) == (False, True, True)
    assert (eth1.dhcp4, eth1.dhcp6, eth1.accept_ra) == (True, False, False)


def test_on_link_route_is_carried_to_both_renderers() -> None:
    files = links_rendered({"networkConfig": {"version": 2, "ethernets": {"eth0": {
        "addresses": ["192.0.2.10/24"],
        "routes": [{"to": "default", "via": "198.51.100.1", "on-link": True}]}}}})
    assert "GatewayOnLink=yes" in files["/etc/systemd/network/10-machine-agent-eth0.network"]
    assert "on-link: true" in files["/etc/netplan/60-machine-agent.yaml"]


def test_ipam_claims_are_given_by_the_extension_key() -> None:
    spec = network_spec({"networkConfig": {"version": 2, "ethernets": {"eth0": {
        "x-machine-agent": {"ipam": [{"plugin": "netbox", "pool": "prod-v4"},
                                     {"plugin": "netbox", "pool": "prod-v6",
                                      "family": "ipv6"}]},
        "routes": [{"to": "203.0.113.0/24", "via": "198.51.100.254"}]}}}})
    claims = ipam_refs(spec)
    assert [(c.interface, c.ref.pool, c.ref.family) for c in claims] == [
        ("eth0", "prod-v4", "ipv4"), ("eth0", "prod-v6", "ipv6")]
    assert network_errors({"networkConfig": {"version": 2, "ethernets": {"eth0": {
        "x-machine-agent": {"ipam": [{"plugin": "netbox", "pool": "p", "family": "v4"}]}
    }}}}) == ["spec.network.networkConfig.ethernets.eth0.x-machine-agent.ipam[0].family: "
              "'v4' is not one of: ipv4, ipv6"]


def test_interfaces_and_network_config_together_are_refused() -> None:
    assert network_errors({"interfaces": [{"name": "eth0"}],
                           "networkConfig": {"version": 2, "ethernets": {"eth1": {}}}}) == [
        "spec.network.interfaces: is given with networkConfig (give the interfaces in one "
        "of them)"]


def test_a_version_1_document_is_refused_by_name() -> None:
    assert network_errors({"networkConfig": {"version": 1, "config": []}})[0].startswith(
        "spec.network.networkConfig.version: 1: only version 2 is read")


def agent_config(tmp_path: Path, network: dict[str, Any]) -> Path:
    path = tmp_path / "etc/machine-agent/config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"apiVersion": "machine-agent.io/v1alpha1",
                                    "kind": "AgentConfig", "spec": {"network": network}}))
    return path


def test_the_v2_file_named_by_network_config_from_is_read_as_it_is(tmp_path: Path) -> None:
    target = tmp_path / "etc/machine-agent/network-config.yaml"
    target.parent.mkdir(parents=True)
    target.write_text(EXAMPLE.read_text())
    agent_config(tmp_path, {"networkConfigFrom": "/etc/machine-agent/network-config.yaml"})
    loaded = load_config(Host(tmp_path), [FileSource("/etc/machine-agent/config.yaml")])
    inline = network_spec({"networkConfig": v2(EXAMPLE)})
    assert loaded.config.spec.network.interfaces == inline.interfaces


def test_errors_in_a_v2_file_name_the_file_and_the_v2_path(tmp_path: Path) -> None:
    doc = v2(EXAMPLE)
    doc["network"]["bonds"]["bond0"]["parameters"]["mode"] = "lacp"
    (tmp_path / "nc.yaml").write_text(yaml.safe_dump(doc))
    agent_config(tmp_path, {"networkConfigFrom": "/nc.yaml"})
    with pytest.raises(ConfigError) as info:
        load_config(Host(tmp_path), [FileSource("/etc/machine-agent/config.yaml")])
    (error,) = info.value.errors
    assert error.origin == "network-config v2 file /nc.yaml"
    assert error.path == "spec.network.networkConfig.network.bonds.bond0.parameters.mode"


def cloud_init_ran(root: Path, network_config: Any | None) -> None:
    run = root / "run/cloud-init"
    run.mkdir(parents=True)
    (run / "result.json").write_text("{}")
    (run / "instance-data-sensitive.json").write_text(json.dumps(
        {"v1": {"instance_id": "iid-node-9"}, "ds": {"meta_data": {}}}))
    instance = root / "var/lib/cloud/instances/iid-node-9"
    instance.mkdir(parents=True)
    if network_config is not None:
        (instance / "network-config.json").write_text(json.dumps(network_config))


def test_the_datasource_document_is_read_from_cloud_init(tmp_path: Path) -> None:
    # cloud-init writes what it found with the top-level `network:` key removed
    cloud_init_ran(tmp_path, v2(EXAMPLE)["network"])
    agent_config(tmp_path, {"networkConfigFrom": "cloud-init"})
    loaded = load_config(Host(tmp_path), [FileSource("/etc/machine-agent/config.yaml")])
    assert [i.name for i in loaded.config.spec.network.interfaces] == [
        "eno1", "eno2", "eno3", "bond0", "br0", "bond0.100"]


def test_without_a_datasource_document_the_fix_is_named(tmp_path: Path) -> None:
    cloud_init_ran(tmp_path, None)
    agent_config(tmp_path, {"networkConfigFrom": "cloud-init"})
    with pytest.raises(ConfigError) as info:
        load_config(Host(tmp_path), [FileSource("/etc/machine-agent/config.yaml")])
    (error,) = info.value.errors
    assert error.path == "spec.network.networkConfigFrom"
    assert error.hint is not None and "config: disabled" in error.hint


HOSTILE_SCALAR = st.one_of(
    st.text(max_size=20), st.integers(), st.booleans(), st.none(), st.floats(),
    st.sampled_from(["eth0", "bond0", "a\nb", "[Match]", "default", "192.0.2.1",
                     "2001:db8::1/64", "802.3ad", "x-machine-agent", "eth0:1", "../.."]))
HOSTILE_V2 = st.recursive(
    HOSTILE_SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(
            ["version", "ethernets", "bonds", "bridges", "vlans", "eth0", "bond0",
             "addresses", "routes", "match", "set-name", "parameters", "interfaces",
             "nameservers", "id", "link", "mode", "to", "via", "x-machine-agent", "ipam",
             "mtu", "dhcp4", "network"]), st.integers(), st.text(max_size=6)),
            inner, max_size=4)),
    max_leaves=25)


@settings(max_examples=150, deadline=None)
@given(doc=HOSTILE_V2)
def test_any_document_is_translated_or_refused_by_name_never_a_traceback(doc: Any) -> None:
    for network_config in (doc, {"version": 2, "ethernets": doc},
                           {"version": 2, "bonds": {"bond0": doc}}):
        errors = network_errors({"networkConfig": network_config})
        assert all(e.startswith("spec.network.") for e in errors), errors
        if not errors:  # what is accepted renders
            plan = build_plan(network_spec({"networkConfig": network_config}))
            render_networkd(plan)


def test_with_the_datasources_document_cloud_init_networking_is_never_disabled(
        tmp_path: Path) -> None:
    from agent.phases.network.phase import persistent_changes
    from agent.phases.network.render import CLOUD_INIT_DROPIN

    def written(network: dict[str, Any]) -> list[str]:
        spec = network_spec(network)
        changes = persistent_changes(Host(tmp_path, read_only=True), spec, build_plan(spec))
        return [c.key for c in changes]

    doc = {"version": 2, "ethernets": {"eth0": {"addresses": ["192.0.2.10/24"]}}}
    assert any(CLOUD_INIT_DROPIN in key for key in written({"networkConfig": doc}))
    # cloud-init hands the document out only while its network configuration is on
    assert not any(CLOUD_INIT_DROPIN in key for key in written(
        {"networkConfig": doc, "networkConfigFrom": "cloud-init"}))


def test_errors_speak_the_v2_documents_words_not_the_native_models() -> None:
    doc = {"version": 2, "ethernets": {
        "eth0": {"addresses": ["192.0.2.10/24"]}, "eth1": {"addresses": ["192.0.2.11/24"]},
        "eth2": {}},
        "bonds": {"bond0": {"interfaces": ["eth2"], "parameters": {
            "mode": "active-backup", "lacp-rate": "fast"}}}}
    errors = network_errors({"networkConfig": doc})
    assert len(errors) == 2, errors
    overlap = next(e for e in errors if "overlaps" in e)
    assert "of eth0 (networkConfig.ethernets.eth0.addresses[0])" in overlap
    lacp = next(e for e in errors if "lacp" in e)
    assert lacp.endswith("(use mode 802.3ad, or drop lacp-rate)")
    assert not any("interfaces[" in e or "lacpRate" in e for e in errors), errors
