"""The differential of test_real_networkd.py on generated configurations (hypothesis):
NICs, a bridge over some of them, a macvlan, MTUs, static addresses of both families,
gateways, routes with and without a next hop, metrics and tables, NICs found by MAC —
within what this kernel can make (no bond, no VLAN: see the qemu boot test). The examples
are derandomized, so CI runs the same ones every time; a failure prints its document."""

from __future__ import annotations

import ipaddress
import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from tests.integration.network.test_real_networkd import differential, same, without_kernel_choices

pytestmark = pytest.mark.allow_processes

SUBNETS = {4: ["192.0.2.0/26", "192.0.2.64/26", "198.51.100.0/26", "198.51.100.64/26"],
           6: ["2001:db8:1::/64", "2001:db8:2::/64", "2001:db8:3::/64"]}
DESTINATIONS = {4: ["203.0.113.0/27", "203.0.113.32/27", "203.0.113.64/27"],
                6: ["2001:db8:f1::/48", "2001:db8:f2::/48"]}
"""Routed destinations, apart from every link's subnet (the kernel's prefix routes)."""


def host(subnet: str, n: int) -> str:
    return str(ipaddress.ip_network(subnet)[n])


@st.composite
def link_settings(draw: st.DrawFn, subnets: dict[int, list[str]],
                  destinations: dict[int, list[str]], defaults: set[str]) -> dict[str, Any]:
    """Settings of one link; `defaults` holds the default routes given so far: one of
    each (family, table) in a configuration, as validation refuses two of one family,
    table and metric (the kernel refuses the second live, networkd keeps one)."""
    entry: dict[str, Any] = {}
    mtu = draw(st.sampled_from([None, 1280, 1400, 1500, 9000]))
    if mtu is not None:
        entry["mtu"] = mtu
    mine: dict[int, str] = {}
    for family in (4, 6):
        if subnets[family] and draw(st.booleans()):
            mine[family] = subnets[family].pop()
    entry["addresses"] = [{"static": f"{host(net, 10)}/{ipaddress.ip_network(net).prefixlen}"}
                          for net in mine.values()]
    for family, key in ((4, "gateway"), (6, "gateway6")):
        if family in mine and key not in defaults and draw(st.booleans()):
            entry[key] = host(mine[family], 1)
            defaults.add(key)
    routes = []
    for _ in range(draw(st.integers(0, 2))):
        family = draw(st.sampled_from([4, 6]))
        if not destinations[family]:
            continue
        route: dict[str, Any] = {"to": destinations[family].pop()}
        if family in mine and draw(st.booleans()):
            route["via"] = host(mine[family], 2)
        if draw(st.booleans()):
            route["metric"] = draw(st.integers(0, 2000))
        if draw(st.booleans()):
            route["table"] = draw(st.sampled_from([100, 200]))
        routes.append(route)
    if 4 in mine and "table" not in defaults and draw(st.booleans()):
        defaults.add("table")  # a default route of its own table
        routes.append({"to": "default", "via": host(mine[4], 3), "table": 100,
                       "metric": draw(st.integers(0, 100))})
    if routes:
        entry["routes"] = routes
    return entry


@st.composite
def networks(draw: st.DrawFn) -> dict[str, Any]:
    subnets = {f: list(draw(st.permutations(n))) for f, n in SUBNETS.items()}
    destinations = {f: list(draw(st.permutations(n))) for f, n in DESTINATIONS.items()}
    defaults: set[str] = set()
    nics = [f"eth{i}" for i in range(draw(st.integers(1, 3)))]
    members = draw(st.lists(st.sampled_from(nics), unique=True)) if draw(st.booleans()) else []
    interfaces: list[dict[str, Any]] = []
    for i, nic in enumerate(nics):
        entry: dict[str, Any] = {"name": nic}
        # a bridge member found by MAC is left out: a veth has no permanent MAC, so
        # networkd is given its current one (realnet._veth_mac_match), which the bridge
        # takes too; by permanent MAC, as the agent writes it, it is proved in test_match
        # and on virtio NICs by the qemu boot test
        if nic not in members and draw(st.booleans()):
            entry["match"] = {"macAddress": f"52:54:00:12:34:{i:02x}"}
        if nic not in members:
            entry.update(draw(link_settings(subnets, destinations, defaults)))
        interfaces.append(entry)
    if members:
        bridge = draw(link_settings(subnets, destinations, defaults))
        interfaces.append({"name": "br0", "type": "bridge",
                           # STP off: with it the ports learn for 2 x 15 s before the
                           # bridge has carrier, which every path waits out (proved once
                           # in test_real_networkd), too long for each example
                           "bridge": {"members": members, "stp": False},
                           **bridge})
        # the members carry the bridge's MTU: networkd does not keep a bridge MTU its
        # ports do not have, and validation refuses one (test_real_networkd's
        # test_a_bridge_mtu_its_ports_lack_is_refused_and_one_they_share_is_kept)
        for entry in interfaces:
            if entry["name"] in members and "mtu" in bridge:
                entry["mtu"] = bridge["mtu"]
    carriers = [n for n in nics if n not in members]
    if carriers and draw(st.booleans()):
        parent = draw(st.sampled_from(carriers))
        macvlan = draw(link_settings(subnets, destinations, defaults))
        # a macvlan's MTU above its parent's is refused by the kernel, live and in
        # networkd, and by validation (test_refused_configs): not generated
        limit = next(e.get("mtu", 1500) for e in interfaces if e["name"] == parent)
        if macvlan.get("mtu", 0) > limit:
            del macvlan["mtu"]
        interfaces.append({"name": "mv0", "type": "macvlan",
                           "macvlan": {"parent": parent,
                                       "mode": draw(st.sampled_from(["bridge", "private",
                                                                     "vepa"]))},
                           **macvlan})
    return {"interfaces": interfaces}


_example = itertools.count()


@settings(max_examples=8, derandomize=True, phases=[Phase.generate],
          report_multiple_bugs=False)
# no shrinking: each example runs real daemons for seconds; the failing one is printed
@given(doc=networks())
def test_generated_configs_mean_the_same_on_every_path(doc: dict[str, Any],
                                                       tmp_path: Path) -> None:
    got = differential(doc, tmp_path / f"example-{next(_example)}")
    assert got["networkd_said"] == []
    same(without_kernel_choices(got["live"]), without_kernel_choices(got["networkd"]))
    if "netplan" in got:
        assert got["netplan_said"] == []
        same(without_kernel_choices(got["live"]), without_kernel_choices(got["netplan"]))
