"""The example network-config v2 file (a bond, a VLAN on it, a bridge, dual-stack static
addresses, routes with metrics, per-interface DNS) applied live in a namespace as far as
this kernel allows: it has bridges but no bonding, so the whole document ends in
KernelFeatureMissing with nothing changed, and its bridge part is applied for real."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.errors import AgentError, Reason
from tests.integration.network.segment import FAST, Segment, config, run_phase, segment

pytestmark = pytest.mark.allow_processes

EXAMPLE = Path(__file__).parents[3] / "examples" / "network-config" / "bond-vlan-bridge.yaml"
NO_DAD = {**FAST, "duplicateAddressDetection": False}
"""With STP the bridge has no carrier for twice its forward delay (8s), and an IPv6
address stays tentative until it has: added without DAD here, as a segment with
accept_dad=0 would."""


@pytest.fixture
def nics() -> Iterator[Segment]:
    """The node namespace with the example's three NICs: eno3 is the link to the router,
    eno1 and eno2 veths of their own."""
    with segment() as seg:
        seg.node_ip("link", "set", "n0", "name", "eno3")
        for nic in ("eno1", "eno2"):
            seg.node_ip("link", "add", nic, "type", "veth", "peer", "name", f"{nic}p")
        yield seg


def example() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return doc


def sysctl(seg: Segment, link: str) -> int:
    return int(subprocess.run(
        ["ip", "netns", "exec", seg.node, "cat", f"/proc/sys/net/ipv6/conf/{link}/accept_ra"],
        capture_output=True, text=True, check=True, timeout=30).stdout)


def test_the_whole_document_ends_in_kernel_feature_missing_with_nothing_changed(
        nics: Segment, tmp_path: Path) -> None:
    before = nics.state()
    with pytest.raises(AgentError) as info:
        run_phase(tmp_path, nics, config({"networkConfig": example(),
                                          "conflictDetection": NO_DAD}, endpoint=None))
    assert info.value.reason == Reason.KernelFeatureMissing
    assert "bonding" in info.value.message
    assert nics.state() == before
    assert not (tmp_path / "etc/systemd/network").exists()


def test_its_bridge_part_is_applied_live(nics: Segment, tmp_path: Path) -> None:
    doc = example()
    network = doc["network"]
    network["ethernets"] = {"eno3": network["ethernets"]["eno3"]}
    del network["bonds"], network["vlans"]
    run_phase(tmp_path, nics, config({"networkConfig": doc, "conflictDetection": NO_DAD},
                                     endpoint=None))
    (br0,) = json.loads(nics.node_ip("-d", "-j", "link", "show", "br0"))
    data = br0["linkinfo"]["info_data"]
    assert (data["stp_state"], data["forward_delay"]) == (1, 400)
    assert "master br0" in nics.node_ip("link", "show", "eno3")
    shown = nics.node_ip("addr", "show", "br0")
    assert "inet 192.0.2.10/24" in shown and "inet6 2001:db8::10/64" in shown
    assert "192.0.2.128/25 via 192.0.2.254 dev br0 proto static metric 20" in \
        nics.node_ip("route", "show")
    assert "2001:db8:1::/48 via 2001:db8::fe dev br0 proto static metric 20" in \
        nics.node_ip("-6", "route", "show")
    assert (sysctl(nics, "br0"), sysctl(nics, "eno3")) == (0, 0)
    network_file = (tmp_path / "etc/systemd/network/10-machine-agent-br0.network").read_text()
    assert "DNS=192.0.2.53\n" in network_file and "Domains=mgmt.example.net\n" in network_file
