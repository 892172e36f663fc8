"""The network phase against real namespaces: applied over netlink, proved on the wire,
rolled back to the exact previous state when the proof fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.errors import AgentError, Reason
from agent.netlink.rtnl import RTM_GETADDR, RTM_GETROUTE, Rtnl
from tests.integration.network.segment import (
    FAST,
    GATEWAY,
    GATEWAY6,
    Segment,
    config,
    holds,
    run_phase,
    segment,
)

pytestmark = pytest.mark.allow_processes


@pytest.fixture
def seg() -> Iterator[Segment]:
    with segment() as s:
        yield s


def static(*addresses: str) -> list[dict[str, str]]:
    return [{"static": a} for a in addresses]


def test_single_static_address_is_applied_checked_and_persisted(seg: Segment,
                                                                tmp_path: Path) -> None:
    seg.listen()
    cfg = config({"hostname": "node-1.example.net", "dns": {"nameservers": [GATEWAY]},
                  "interfaces": [{"name": "n0", "gateway": GATEWAY,
                                  "addresses": static("192.0.2.10/24")}]})
    run = run_phase(tmp_path, seg, cfg)
    assert "inet 192.0.2.10/24" in seg.node_ip("addr", "show", "n0")
    assert f"default via {GATEWAY} dev n0" in seg.node_ip("route", "show")
    assert run.result.gateways == [GATEWAY]
    assert run.result.management == f"{GATEWAY}:6443"
    network = (tmp_path / "etc/systemd/network/10-machine-agent-n0.network").read_text()
    assert "Address=192.0.2.10/24" in network and f"Gateway={GATEWAY}" in network
    assert (tmp_path / "etc/hostname").read_text() == "node-1.example.net\n"
    assert "192.0.2.10\tnode-1.example.net node-1" in (tmp_path / "etc/hosts").read_text()
    assert (tmp_path / "etc/systemd/resolved.conf.d/machine-agent.conf").exists()
    assert (tmp_path / "etc/cloud/cloud.cfg.d/99-machine-agent-network.cfg").exists()


def test_second_run_on_a_configured_node_changes_nothing(seg: Segment, tmp_path: Path) -> None:
    seg.listen()
    cfg = config({"interfaces": [{"name": "n0", "gateway": GATEWAY, "mtu": 1400,
                                  "addresses": static("192.0.2.10/24", "192.0.2.11/24")}]})
    first = run_phase(tmp_path, seg, cfg)
    assert first.result.netlink_changes == 6  # MTU, accept_ra, up, 2 addresses, route
    # the kernel adds n0's link-local address once its link watch sees the carrier, up to
    # a second after up under load: the state is taken once it is there (was flaky)
    seg.up_and_settled("n0")
    state = seg.state()
    again = run_phase(tmp_path, seg, cfg)
    assert again.result.netlink_changes == 0
    assert again.effects == 0  # no netlink change and no file written
    assert seg.state() == state


def test_a_change_made_between_plan_and_apply_is_seen_by_apply(seg: Segment,
                                                                tmp_path: Path) -> None:
    # apply reuses the plan's diff only when its snapshot finds what the plan saw
    seg.listen()
    cfg = config({"interfaces": [{"name": "n0", "gateway": GATEWAY,
                                  "addresses": static("192.0.2.10/24", "192.0.2.11/24")}]})
    run = run_phase(tmp_path, seg, cfg, between=lambda: seg.node_ip(
        "addr", "add", "192.0.2.11/24", "dev", "n0"))
    assert run.result.netlink_changes == 4  # accept_ra, up, other address, route
    shown = seg.node_ip("addr", "show", "n0")
    assert "inet 192.0.2.10/24" in shown and "inet 192.0.2.11/24" in shown


def test_a_run_takes_one_snapshot_of_the_namespace_before_its_change(
        seg: Segment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Apply starts from the plan's snapshot when the kernel reported no change since it
    # (the previous test: one that did is seen); verify reads nothing back when no link
    # or address was deleted since apply began (the next test: one that was is seen).
    seg.listen()
    dumps: list[int] = []
    dump = Rtnl.dump

    def counted(self: Rtnl, kind: int, body: bytes) -> Iterator[tuple[int, memoryview]]:
        dumps.append(kind)
        return dump(self, kind, body)

    monkeypatch.setattr(Rtnl, "dump", counted)
    cfg = config({"interfaces": [{"name": "n0", "gateway": GATEWAY,
                                  "addresses": static("192.0.2.10/24", "192.0.2.11/24")}]})
    run = run_phase(tmp_path, seg, cfg)
    assert run.result.netlink_changes == 5  # accept_ra, up, 2 addresses, route
    # addresses and routes (the bulk of a node's tables): the plan's snapshot alone (IPv4
    # and IPv6 routes; IPv4 only here: waiting for IPv6 duplicate address detection
    # polls the addresses)
    assert dumps.count(RTM_GETROUTE) == 2, dumps
    assert dumps.count(RTM_GETADDR) == 1, dumps


@pytest.mark.parametrize("removal", [("addr", "del", "192.0.2.11/24", "dev", "n0"),
                                     ("link", "set", "n0", "down")])
def test_an_address_taken_away_after_apply_fails_verify(
        seg: Segment, tmp_path: Path, removal: tuple[str, ...]) -> None:
    # verify trusts the kernel's acknowledgements only while it heard no deletion: one
    # address deleted, or the link taken down (which deletes its IPv6 addresses; IPv4
    # ones stay), is read back and reported
    seg.listen()
    cfg = config({"interfaces": [{"name": "n0", "gateway": GATEWAY, "addresses": static(
        "192.0.2.10/24", "192.0.2.11/24", "2001:db8::11/64")}]})
    with pytest.raises(AgentError) as info:
        run_phase(tmp_path, seg, cfg, after_apply=lambda: seg.node_ip(*removal))
    assert info.value.reason == Reason.InProgress
    gone = "192.0.2.11/24" if removal[0] == "addr" else "2001:db8::11/64"
    assert "went missing after apply" in info.value.message and gone in info.value.message


def test_dual_stack_waits_for_dad_and_routes_both_families(seg: Segment,
                                                          tmp_path: Path) -> None:
    seg.listen()
    cfg = config({"interfaces": [{"name": "n0", "gateway": GATEWAY, "gateway6": GATEWAY6,
                                  "addresses": static("192.0.2.10/24", "2001:db8::10/64")}]})
    run = run_phase(tmp_path, seg, cfg)
    (line,) = [line for line in seg.node_ip("-6", "addr", "show", "n0").splitlines()
               if "2001:db8::10/64" in line]
    assert "scope global" in line and "tentative" not in line and "dadfailed" not in line
    assert f"default via {GATEWAY6} dev n0" in seg.node_ip("-6", "route", "show")
    assert run.result.gateways == [GATEWAY, GATEWAY6]


def test_with_dad_off_ipv6_addresses_are_added_without_it(seg: Segment,
                                                          tmp_path: Path) -> None:
    seg.listen()
    cfg = config({"conflictDetection": {**FAST, "duplicateAddressDetection": False},
                  "interfaces": [{"name": "n0", "gateway": GATEWAY,
                                  "addresses": static("192.0.2.10/24", "2001:db8::10/64")}]})
    run_phase(tmp_path, seg, cfg)
    (line,) = [line for line in seg.node_ip("-6", "addr", "show", "n0").splitlines()
               if "2001:db8::10/64" in line]
    assert "nodad" in line and "tentative" not in line


def test_bridge_with_the_nic_as_member_holds_the_address(seg: Segment, tmp_path: Path) -> None:
    seg.listen()
    cfg = config({"interfaces": [
        {"name": "n0"},
        {"name": "br0", "type": "bridge", "bridge": {"members": ["n0"]}, "gateway": GATEWAY,
         "addresses": static("192.0.2.10/24")}]})
    run_phase(tmp_path, seg, cfg)
    assert "master br0" in seg.node_ip("link", "show", "n0")
    assert "inet 192.0.2.10/24" in seg.node_ip("addr", "show", "br0")
    assert "Bridge=br0" in (tmp_path / "etc/systemd/network/10-machine-agent-n0.network"
                            ).read_text()


def test_macvlan_on_the_nic_holds_the_address(seg: Segment, tmp_path: Path) -> None:
    seg.listen()
    cfg = config({"interfaces": [
        {"name": "n0"},
        {"name": "mv0", "type": "macvlan", "macvlan": {"parent": "n0"}, "gateway": GATEWAY,
         "addresses": static("192.0.2.10/24")}]})
    run = run_phase(tmp_path, seg, cfg)
    assert "inet 192.0.2.10/24" in seg.node_ip("addr", "show", "mv0")
    assert run.result.management == f"{GATEWAY}:6443"


def test_route_in_its_own_table_with_metric(seg: Segment, tmp_path: Path) -> None:
    seg.listen()
    cfg = config({"interfaces": [{"name": "n0", "gateway": GATEWAY,
                                  "addresses": static("192.0.2.10/24"),
                                  "routes": [{"to": "198.51.100.0/24", "via": GATEWAY,
                                              "table": 100, "metric": 10}]}]})
    run_phase(tmp_path, seg, cfg)
    assert (f"198.51.100.0/24 via {GATEWAY} dev n0 proto static metric 10"
            in seg.node_ip("route", "show", "table", "100"))


def test_address_in_use_on_the_segment_is_reported_and_not_kept(seg: Segment,
                                                                 tmp_path: Path) -> None:
    seg.listen()
    seg.router_ip("addr", "add", "192.0.2.10/24", "dev", "r0")  # another host holds it
    before = seg.state()
    with pytest.raises(AgentError) as info:
        run_phase(tmp_path, seg, config({"interfaces": [{
            "name": "n0", "gateway": GATEWAY, "addresses": static("192.0.2.10/24")}]}))
    assert info.value.reason == Reason.AddressConflict
    assert "192.0.2.10" in info.value.message
    assert seg.state() == before
    assert not (tmp_path / "etc/systemd/network").exists()


def test_ipv6_address_failing_dad_is_a_conflict(seg: Segment, tmp_path: Path) -> None:
    seg.router_ip("addr", "add", "2001:db8::10/64", "dev", "r0", "nodad")
    seg.up_and_settled("n0")
    before = seg.state()
    with pytest.raises(AgentError) as info:
        run_phase(tmp_path, seg, config({"interfaces": [{
            "name": "n0", "addresses": static("2001:db8::10/64")}]}, endpoint=None))
    assert info.value.reason == Reason.AddressConflict
    assert "duplicate address detection" in info.value.message
    assert seg.state() == before


def test_gateway_absent_rolls_back_to_the_exact_previous_state(seg: Segment,
                                                               tmp_path: Path) -> None:
    seg.listen()
    # the node as it was: up, an old address and a route the agent would replace
    seg.up_and_settled("n0")
    seg.node_ip("addr", "add", "192.0.2.99/24", "dev", "n0")
    seg.node_ip("route", "add", "203.0.113.0/24", "via", GATEWAY, "dev", "n0")
    before = seg.state()
    cfg = config({"interfaces": [{"name": "n0", "gateway": "192.0.2.254", "mtu": 1400,
                                  "addresses": static("192.0.2.10/24")}]}, timeout="1s")
    with pytest.raises(AgentError) as info:
        run_phase(tmp_path, seg, cfg)
    assert info.value.reason == Reason.GatewayUnreachable
    assert info.value.temporary
    assert seg.state() == before
    assert not (tmp_path / "etc/systemd/network").exists()


def test_management_api_closed_rolls_back(seg: Segment, tmp_path: Path) -> None:
    seg.up_and_settled("n0")
    seg.node_ip("addr", "add", "192.0.2.99/24", "dev", "n0")
    before = seg.state()
    cfg = config({"interfaces": [{"name": "n0", "gateway": GATEWAY,
                                  "addresses": static("192.0.2.10/24")}]}, timeout="1s")
    with pytest.raises(AgentError) as info:
        run_phase(tmp_path, seg, cfg)  # nothing listens on 192.0.2.1:6443
    assert info.value.reason == Reason.ManagementUnreachable
    assert "rolled back" in info.value.message
    assert seg.state() == before
    assert not (tmp_path / "etc/systemd/network").exists()


def test_vlan_without_kernel_support_names_the_module_and_leaves_nothing(
        seg: Segment, tmp_path: Path) -> None:
    before = seg.state()
    cfg = config({"interfaces": [
        {"name": "n0"},
        {"name": "n0.100", "type": "vlan", "vlan": {"id": 100, "parent": "n0"},
         "addresses": static("198.51.100.10/24")}]}, endpoint=None)
    with pytest.raises(AgentError) as info:
        run_phase(tmp_path, seg, cfg)
    assert info.value.reason == Reason.KernelFeatureMissing
    assert "8021q" in info.value.message
    assert seg.state() == before


def test_unknown_interface_is_reported_without_any_change(seg: Segment,
                                                          tmp_path: Path) -> None:
    before = seg.state()
    with pytest.raises(AgentError) as info:
        run_phase(tmp_path, seg, config({"interfaces": [
            {"name": "eth7", "match": {"macAddress": "02:00:00:00:00:99"}}]}, endpoint=None))
    assert info.value.reason == Reason.InterfaceNotFound
    assert "eth7: no link matches permanent MAC address 02:00:00:00:00:99" in info.value.message
    assert seg.state() == before


def test_interface_found_by_driver_is_configured_under_its_kernel_name(
        seg: Segment, tmp_path: Path) -> None:
    seg.listen()
    run_phase(tmp_path, seg, config({"interfaces": [
        {"name": "uplink", "match": {"driver": "veth"}, "gateway": GATEWAY,
         "addresses": static("192.0.2.10/24")}]}))
    assert "inet 192.0.2.10/24" in seg.node_ip("addr", "show", "n0")
    assert "Driver=veth" in (tmp_path / "etc/systemd/network/10-machine-agent-uplink.network"
                             ).read_text()


def test_change_refused_amid_others_is_named_and_everything_is_rolled_back(
        seg: Segment, tmp_path: Path) -> None:
    # the changes go to the kernel many at once: the routes before and after the refused
    # one are made too, and the rollback must take them out again
    seg.up_and_settled("n0")
    seg.node_ip("addr", "add", "192.0.2.99/24", "dev", "n0")
    seg.node_ip("route", "add", "198.51.100.128/25", "dev", "lo")  # takes the slot
    before = seg.state()
    cfg = config({"interfaces": [{"name": "n0", "addresses": static("192.0.2.10/24"),
                                  "routes": [
                                      {"to": "198.51.100.0/25", "via": GATEWAY},
                                      {"to": "198.51.100.128/25", "via": GATEWAY},
                                      {"to": "203.0.113.0/25", "via": GATEWAY}]}]},
                 endpoint=None)
    with pytest.raises(AgentError) as info:
        run_phase(tmp_path, seg, cfg)
    assert (f"netlink refused to add route 198.51.100.128/25 via {GATEWAY} metric 0 on "
            "n0: [Errno 17] File exists") in info.value.message
    assert seg.state() == before
    assert not (tmp_path / "etc/systemd/network").exists()


def test_a_link_local_ipv6_gateway_beside_a_global_address_is_applied_and_answers(
        seg: Segment, tmp_path: Path) -> None:
    # the usual setup at hosters: a global /64 on the NIC, the router at fe80::1
    seg.router_ip("addr", "add", "fe80::1/64", "dev", "r0", "nodad")
    seg.listen()
    cfg = config({"interfaces": [{"name": "n0", "gateway": GATEWAY, "gateway6": "fe80::1",
                                  "addresses": static("192.0.2.10/24", "2001:db8::10/64")}]})
    run = run_phase(tmp_path, seg, cfg)
    assert "default via fe80::1 dev n0" in seg.node_ip("-6", "route", "show")
    assert run.result.gateways == [GATEWAY, "fe80::1"]
    network = (tmp_path / "etc/systemd/network/10-machine-agent-n0.network").read_text()
    assert "Gateway=fe80::1" in network


def test_an_address_removed_by_hand_after_a_run_is_no_longer_up_to_date(
        seg: Segment, tmp_path: Path) -> None:
    # the orchestrator skips a phase whose inputs are unchanged only if still_holds: a
    # difference the plan reports must make the phase run again
    seg.listen()
    cfg = config({"interfaces": [{"name": "n0", "gateway": GATEWAY,
                                  "addresses": static("192.0.2.10/24", "192.0.2.11/24")}]})
    first = run_phase(tmp_path, seg, cfg)
    assert holds(tmp_path, seg, cfg, first)
    seg.node_ip("addr", "del", "192.0.2.11/24", "dev", "n0")
    assert not holds(tmp_path, seg, cfg, first)
    again = run_phase(tmp_path, seg, cfg)
    assert again.result.netlink_changes == 1
    assert "inet 192.0.2.11/24" in seg.node_ip("addr", "show", "n0")
    assert holds(tmp_path, seg, cfg, again)


def test_a_persistent_file_changed_by_hand_is_no_longer_up_to_date(
        seg: Segment, tmp_path: Path) -> None:
    seg.listen()
    cfg = config({"interfaces": [{"name": "n0", "gateway": GATEWAY,
                                  "addresses": static("192.0.2.10/24")}]})
    first = run_phase(tmp_path, seg, cfg)
    (tmp_path / "etc/systemd/network/10-machine-agent-n0.network").write_text("[Match]\n")
    assert not holds(tmp_path, seg, cfg, first)
