"""Rendered files parsed back hold exactly the model: nothing lost, nothing added."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.phases.network.model import LinkPlan, NetworkPlan, build_plan
from agent.phases.network.render import (
    NETPLAN_FILE,
    render_dns,
    render_netplan,
    render_networkd,
)
from tests.unit.network.netconfig import network_spec

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "input.yaml").exists())


def plan_of(case: str) -> NetworkPlan:
    return build_plan(network_spec(yaml.safe_load((GOLDEN / case / "input.yaml").read_text())))


def parse_ini(text: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """systemd's unit-file syntax: repeated sections and keys kept in order."""
    sections: list[tuple[str, list[tuple[str, str]]]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.append((line[1:-1], []))
        else:
            key, sep, value = line.partition("=")
            assert sep and sections, f"not a key=value line: {raw!r}"
            sections[-1][1].append((key, value))
    return sections


def values(sections: list[tuple[str, list[tuple[str, str]]]], section: str, key: str
           ) -> list[str]:
    return [v for name, items in sections if name == section for k, v in items if k == key]


def route_tuple(dst: str, via: str | None, metric: int | None, table: int | None
                ) -> tuple[str, str | None, int | None, int | None]:
    return (str(ipaddress.ip_network(dst)), via, metric, table)


def routes_of(link: LinkPlan) -> list[tuple[str, str | None, int | None, int | None]]:
    return [route_tuple(r.dst, r.via, r.metric, r.table) for r in link.routes]


@pytest.mark.parametrize("case", CASES)
def test_networkd_files_parse_back_to_the_plan(case: str) -> None:
    plan = plan_of(case)
    files = render_networkd(plan)
    for link in plan.links:
        net = parse_ini(files[f"/etc/systemd/network/10-machine-agent-{link.name}.network"])
        match = {k: v for name, items in net if name == "Match" for k, v in items}
        assert match == ({"MACAddress": link.match_mac} if link.match_mac else
                         {"Driver": link.match_driver} if link.match_driver else
                         {"Name": link.match_name or link.name})
        assert values(net, "Link", "MTUBytes") == ([str(link.mtu)] if link.mtu else [])
        assert values(net, "Network", "Address") == [str(a) for a in link.addresses]
        master_key = (plan.link(link.master).kind.capitalize() if link.master else None)
        assert values(net, "Network", "Bond") + values(net, "Network", "Bridge") == (
            [link.master] if link.master else [])
        if master_key:
            assert values(net, "Network", master_key) == [link.master]
        children = values(net, "Network", "VLAN") + values(net, "Network", "MACVLAN")
        assert sorted(children) == sorted(link.children)
        routes = []
        for name, items in net:
            if name == "Route":
                kv = dict(items)
                routes.append(route_tuple(
                    kv.get("Destination", "0.0.0.0/0" if "." in kv.get("Gateway", ".")
                           else "::/0"),
                    kv.get("Gateway"),
                    int(kv["Metric"]) if "Metric" in kv else None,
                    int(kv["Table"]) if "Table" in kv else None))
        assert routes == routes_of(link)
        netdev_path = f"/etc/systemd/network/10-machine-agent-{link.name}.netdev"
        assert (netdev_path in files) == link.virtual
        if link.virtual:
            dev = parse_ini(files[netdev_path])
            assert values(dev, "NetDev", "Name") == [link.name]
            assert values(dev, "NetDev", "Kind") == [link.kind]
            if link.vlan_id is not None:
                assert values(dev, "VLAN", "Id") == [str(link.vlan_id)]


@pytest.mark.parametrize("case", CASES)
def test_netplan_yaml_parses_back_to_the_plan(case: str) -> None:
    plan = plan_of(case)
    doc: dict[str, Any] = yaml.safe_load(render_netplan(plan)[NETPLAN_FILE])["network"]
    assert doc["version"] == 2
    seen = set()
    for link in plan.links:
        section = {"ethernet": "ethernets", "bond": "bonds", "bridge": "bridges",
                   "vlan": "vlans"}[link.kind]
        entry = doc[section][link.name]
        seen.add(link.name)
        assert [str(ipaddress.ip_interface(a)) for a in entry.get("addresses", [])] == [
            str(a) for a in link.addresses]
        assert entry.get("mtu") == link.mtu
        assert (entry["dhcp4"], entry["dhcp6"]) == (link.dhcp4, link.dhcp6)
        routes = [route_tuple("0.0.0.0/0" if r["to"] == "default" and "." in r["via"]
                              else "::/0" if r["to"] == "default" else r["to"],
                              r.get("via"), r.get("metric"), r.get("table"))
                  for r in entry.get("routes", [])]
        assert routes == routes_of(link)
        if link.kind == "vlan":
            assert (entry["id"], entry["link"]) == (link.vlan_id, link.parent)
        if link.kind in ("bond", "bridge"):
            members = [m.name for m in plan.links if m.master == link.name]
            assert entry["interfaces"] == members
    assert seen == {name for section in doc.values() if isinstance(section, dict)
                    for name in section}


def test_dns_files_hold_every_server_and_domain_once() -> None:
    plan = plan_of("several-dns")
    resolved = parse_ini(render_dns(plan, "resolved")[
        "/etc/systemd/resolved.conf.d/machine-agent.conf"])
    assert values(resolved, "Resolve", "DNS") == [" ".join(plan.nameservers)]
    assert values(resolved, "Resolve", "Domains") == ["example.net corp.example.net"]
    single = plan_of("single-nic-static")
    conf = render_dns(single, "resolv.conf")["/etc/resolv.conf"]
    assert [line for line in conf.splitlines() if not line.startswith("#")] == [
        "nameserver 192.0.2.53"]
