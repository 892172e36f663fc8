"""Bonds, VLANs, bridges and macvlans created live by the agent's own rtnetlink client.

This kernel has bridge and macvlan but neither bonding nor 8021q: bridges and macvlans
are created in a namespace and read back with `ip -d`; the bond and VLAN requests are
held byte for byte to what `ip link add ... type bond|vlan ...` sends (captured with
strace from the real iproute2, in a namespace of its own), and creating them live ends
in KernelFeatureMissing naming the module."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.errors import AgentError, Reason
from agent.host import Host
from agent.netlink.observe import observe
from agent.netlink.rtnl import NLM_F_CREATE, NLM_F_EXCL, RTM_NEWLINK, connect
from agent.phases.network.apply import Executor, NetOp, forward
from agent.phases.network.hwaddr import networkd_address
from agent.phases.network.match import resolve_names
from agent.phases.network.model import build_plan
from tests.integration.network.segment import GATEWAY, Segment, config, run_phase, segment
from tests.unit.network.netconfig import network_spec

pytestmark = pytest.mark.allow_processes

SENT = re.compile(r"nlmsg_type=0x10 [^,]*, nlmsg_flags=([^,]+), .*?\}, \"((?:\\x[0-9a-f]{2})*)\"")


@pytest.fixture
def seg() -> Iterator[Segment]:
    with segment() as s:
        yield s


def sent_by_ip(seg: Segment, *args: str) -> tuple[str, bytes]:
    """(flags as strace spells them, body after the netlink header) of the RTM_NEWLINK
    that `ip -n NODE link add ...` sends; the kernel may refuse it, that is not asked."""
    proc = subprocess.run(["strace", "-e", "trace=sendmsg", "-xx", "-s", "4096",
                           "ip", "-n", seg.node, "link", "add", *args],
                          capture_output=True, text=True, timeout=30, check=False)
    found = SENT.search(proc.stderr)
    assert found is not None, proc.stderr
    return found.group(1), bytes.fromhex(found.group(2).replace("\\x", ""))


def agent_request(seg: Segment, network: dict[str, Any], link: str) -> tuple[int, bytes]:
    """(flags, body) of the request the network phase makes to create `link`."""
    plan = build_plan(network_spec(network))
    host = Host(Path("/nonexistent"), netns=seg.node, read_only=True)
    with contextlib.closing(connect(host)) as rtnl:
        now = observe(rtnl)
        diff = forward(plan, now, resolve_names(host, plan, now))
        (op,) = [op for op in diff.links if op.what == "link-add" and op.link == link]
        request = Executor(host, rtnl, now.links).request(op)
    assert request.kind == RTM_NEWLINK
    return request.flags, request.body


IP_FLAGS = "NLM_F_REQUEST|NLM_F_ACK|0x600"
"""NLM_F_CREATE|NLM_F_EXCL beside the request and ack flags every change carries."""

ZERO_ID_BR0 = networkd_address(bytes(16), "br0").hex(":")
"""The MAC networkd would give br0 on a machine without an ID (the test's root has none)."""

CASES: dict[str, tuple[dict[str, Any], str, list[str]]] = {
    "bond 802.3ad with LACP rate and hash policy": (
        {"interfaces": [
            {"name": "n0"},
            {"name": "bond0", "type": "bond",
             "bond": {"members": ["n0"], "mode": "802.3ad", "lacpRate": "fast",
                      "transmitHashPolicy": "layer3+4"}}]},
        "bond0",
        ["bond0", "type", "bond", "mode", "802.3ad", "miimon", "100", "lacp_rate", "fast",
         "xmit_hash_policy", "layer3+4"]),
    "bond active-backup with a primary": (
        {"interfaces": [
            {"name": "n0"},
            {"name": "bond0", "type": "bond",
             "bond": {"members": ["n0"], "mode": "active-backup", "miimon": 200,
                      "primary": "n0"}}]},
        "bond0",
        ["bond0", "type", "bond", "mode", "active-backup", "miimon", "200", "primary", "n0"]),
    "vlan": (
        {"interfaces": [{"name": "n0"},
                        {"name": "n0.100", "type": "vlan", "vlan": {"id": 100, "parent": "n0"}}]},
        "n0.100", ["n0.100", "link", "n0", "type", "vlan", "id", "100"]),
    "vlan 802.1ad": (
        {"interfaces": [{"name": "n0"},
                        {"name": "qinq", "type": "vlan",
                         "vlan": {"id": 4094, "parent": "n0", "protocol": "802.1ad"}}]},
        "qinq", ["qinq", "link", "n0", "type", "vlan", "id", "4094", "protocol", "802.1ad"]),
    "bridge with STP and forward delay": (
        {"interfaces": [{"name": "n0"},
                        {"name": "br0", "type": "bridge",
                         "bridge": {"members": ["n0"], "stp": True, "forwardDelay": 4}}]},
        "br0", ["br0", "address", ZERO_ID_BR0, "type", "bridge", "forward_delay", "400",
                "stp_state", "1"]),
    "bond with delays and min-links": (
        {"interfaces": [
            {"name": "n0"},
            {"name": "bond0", "type": "bond",
             "bond": {"members": ["n0"], "mode": "802.3ad", "miimon": 100, "upDelay": 200,
                      "downDelay": 100, "minLinks": 1}}]},
        "bond0",
        ["bond0", "type", "bond", "mode", "802.3ad", "miimon", "100", "updelay", "200",
         "downdelay", "100", "min_links", "1"]),
    "bridge with STP times and priority": (
        {"interfaces": [{"name": "n0"},
                        {"name": "br0", "type": "bridge",
                         "bridge": {"members": ["n0"], "stp": True, "helloTime": 3,
                                    "maxAge": 12, "priority": 4096}}]},
        "br0", ["br0", "address", ZERO_ID_BR0, "type", "bridge", "stp_state", "1",
                "hello_time", "300", "max_age", "1200", "priority", "4096"]),
    "macvlan": (
        {"interfaces": [{"name": "n0"},
                        {"name": "mv0", "type": "macvlan",
                         "macvlan": {"parent": "n0", "mode": "private"}}]},
        "mv0", ["mv0", "link", "n0", "type", "macvlan", "mode", "private"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_link_creation_is_what_iproute2_sends(seg: Segment, case: str) -> None:
    network, link, ip_args = CASES[case]
    flags, body = agent_request(seg, network, link)
    ip_flags, ip_body = sent_by_ip(seg, *ip_args)
    assert ip_flags == IP_FLAGS and flags == NLM_F_CREATE | NLM_F_EXCL
    assert body == ip_body


def link_details(seg: Segment, name: str) -> dict[str, Any]:
    (shown,) = json.loads(seg.node_ip("-d", "-j", "link", "show", name))
    info: dict[str, Any] = shown["linkinfo"]
    return {"kind": info["info_kind"], **info.get("info_data", {}),
            "master": shown.get("master")}


def test_bridge_is_created_live_with_stp_and_forward_delay(seg: Segment,
                                                           tmp_path: Path) -> None:
    # no gateway check: with STP the port only forwards after twice the forward delay
    run_phase(tmp_path, seg, config({"interfaces": [
        {"name": "n0"},
        {"name": "br0", "type": "bridge",
         "bridge": {"members": ["n0"], "stp": True, "forwardDelay": 4},
         "addresses": [{"static": "192.0.2.10/24"}]}]}, endpoint=None))
    br0 = link_details(seg, "br0")
    assert (br0["kind"], br0["stp_state"], br0["forward_delay"]) == ("bridge", 1, 400)
    assert link_details(seg, "n0")["master"] == "br0"
    netdev = (tmp_path / "etc/systemd/network/10-machine-agent-br0.netdev").read_text()
    assert "STP=yes" in netdev and "ForwardDelaySec=4" in netdev


def test_macvlan_is_created_live_in_its_mode(seg: Segment, tmp_path: Path) -> None:
    run_phase(tmp_path, seg, config({"interfaces": [
        {"name": "n0"},
        {"name": "mv0", "type": "macvlan", "macvlan": {"parent": "n0", "mode": "private"},
         "addresses": [{"static": "192.0.2.10/24"}]}]}, endpoint=None))
    mv0 = link_details(seg, "mv0")
    assert (mv0["kind"], mv0["mode"]) == ("macvlan", "private")
    assert "inet 192.0.2.10/24" in seg.node_ip("addr", "show", "mv0")


def test_bond_without_kernel_support_names_the_module_and_leaves_nothing(
        seg: Segment, tmp_path: Path) -> None:
    # this kernel has no bonding: the request is well formed (see above) and refused
    # with EOPNOTSUPP; before, every bond failed on every kernel in pyroute2
    before = seg.state()
    with pytest.raises(AgentError) as info:
        run_phase(tmp_path, seg, config({"interfaces": [
            {"name": "n0"},
            {"name": "bond0", "type": "bond",
             "bond": {"members": ["n0"], "mode": "802.3ad", "lacpRate": "fast"},
             "addresses": [{"static": "198.51.100.10/24"}]}]}, endpoint=None))
    assert info.value.reason == Reason.KernelFeatureMissing
    assert "bonding" in info.value.message
    assert seg.state() == before
    assert not (tmp_path / "etc/systemd/network").exists()


def test_created_link_is_one_recorded_change_on_the_run_socket(seg: Segment,
                                                              tmp_path: Path) -> None:
    host = Host(tmp_path, netns=seg.node)
    with contextlib.closing(connect(host)) as rtnl:
        executor = Executor(host, rtnl)
        executor.run([NetOp("link-add", "br9", (("kind", "bridge"), ("stp", False)),
                            "create bridge br9")])
        assert executor.count == 1
    assert link_details(seg, "br9")["stp_state"] == 0
    assert host.effects.recent[-1] == "netlink: create bridge br9"


def test_a_run_makes_one_netlink_socket_and_one_change_watch(
        seg: Segment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # plan, apply (a bridge created, a NIC enslaved, addresses, the gateway check) and
    # verify share the run's socket: before, each opened its own, and every created
    # link one more through pyroute2. The second is the plan's change watch (listening
    # only, closed when apply starts).
    opened: list[str] = []
    original = Host.rtnetlink

    def counted(host: Host) -> socket.socket:
        opened.append(host.netns or "")
        return original(host)

    monkeypatch.setattr(Host, "rtnetlink", counted)
    seg.listen()
    run_phase(tmp_path, seg, config({"interfaces": [
        {"name": "n0"},
        {"name": "br0", "type": "bridge", "bridge": {"members": ["n0"]},
         "gateway": GATEWAY, "addresses": [{"static": "192.0.2.10/24"}]}]}))
    assert opened == [seg.node, seg.node]
