"""One meaning on every path: what the files tell networkd and netplan at the next boot
is what the live apply does now — the link's name (renamed only with `rename`, as
netplan's set-name; a .link file for networkd) and accept_ra — and a rollback undoes a
rename like any other change."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.errors import AgentError, Reason
from tests.integration.network.segment import GATEWAY, Segment, config, run_phase, segment

pytestmark = pytest.mark.allow_processes

NETWORKD = "etc/systemd/network/10-machine-agent"


@pytest.fixture
def seg() -> Iterator[Segment]:
    with segment() as s:
        yield s


def accept_ra(seg: Segment, link: str) -> int:
    return int(subprocess.run(
        ["ip", "netns", "exec", seg.node, "cat", f"/proc/sys/net/ipv6/conf/{link}/accept_ra"],
        capture_output=True, text=True, check=True, timeout=30).stdout)


def link_names(seg: Segment) -> set[str]:
    return set(seg.state()["links"])


def test_rename_gives_the_matched_link_its_name_live_and_in_the_files(
        seg: Segment, tmp_path: Path) -> None:
    seg.listen()
    cfg = config({"renderer": "networkd", "interfaces": [
        {"name": "uplink", "match": {"driver": "veth"}, "rename": True, "gateway": GATEWAY,
         "addresses": [{"static": "192.0.2.10/24"}]}]})
    run_phase(tmp_path, seg, cfg)
    assert link_names(seg) == {"lo", "uplink"}
    assert "inet 192.0.2.10/24" in seg.node_ip("addr", "show", "uplink")
    assert f"default via {GATEWAY} dev uplink" in seg.node_ip("route", "show")
    link_file = (tmp_path / f"{NETWORKD}-uplink.link").read_text()
    assert "Driver=veth" in link_file and "\n[Link]\nName=uplink\n" in link_file
    assert "Name=uplink" in (tmp_path / f"{NETWORKD}-uplink.network").read_text()
    again = run_phase(tmp_path, seg, cfg)
    assert again.result.netlink_changes == 0 and again.effects == 0


def test_matched_by_name_and_renamed_the_next_run_finds_it_by_its_new_name(
        seg: Segment, tmp_path: Path) -> None:
    cfg = config({"interfaces": [
        {"name": "wan0", "match": {"name": "n0"}, "rename": True,
         "addresses": [{"static": "192.0.2.10/24"}]}]}, endpoint=None)
    run_phase(tmp_path, seg, cfg)
    assert link_names(seg) == {"lo", "wan0"}
    assert "OriginalName=n0" in (tmp_path / f"{NETWORKD}-wan0.link").read_text()
    assert run_phase(tmp_path, seg, cfg).result.netlink_changes == 0


def test_without_rename_the_link_keeps_its_kernel_name_everywhere(
        seg: Segment, tmp_path: Path) -> None:
    cfg = config({"renderer": "netplan", "interfaces": [
        {"name": "uplink", "match": {"driver": "veth"},
         "addresses": [{"static": "192.0.2.10/24"}]}]}, endpoint=None)
    run_phase(tmp_path, seg, cfg)
    assert link_names(seg) == {"lo", "n0"}
    assert "set-name" not in (tmp_path / "etc/netplan/60-machine-agent.yaml").read_text()


def test_a_rename_is_rolled_back_with_the_rest(seg: Segment, tmp_path: Path) -> None:
    seg.up_and_settled("n0")
    seg.node_ip("addr", "add", "192.0.2.99/24", "dev", "n0")
    before, ra_before = seg.state(), accept_ra(seg, "n0")
    cfg = config({"interfaces": [
        {"name": "uplink", "match": {"driver": "veth"}, "rename": True,
         "gateway": "192.0.2.254", "addresses": [{"static": "192.0.2.10/24"}]}]},
        timeout="1s")
    with pytest.raises(AgentError) as info:
        run_phase(tmp_path, seg, cfg)
    assert info.value.reason == Reason.GatewayUnreachable
    # the rename took n0 down and up again: its link-local address comes back once the
    # kernel's link watch sees the carrier (asynchronously, within a second)
    for _ in range(50):
        if seg.state() == before:
            break
        time.sleep(0.1)
    assert seg.state() == before
    assert accept_ra(seg, "n0") == ra_before == 1


def test_router_advertisements_are_refused_live_as_the_files_say(
        seg: Segment, tmp_path: Path) -> None:
    assert accept_ra(seg, "n0") == 1  # the kernel's default
    run_phase(tmp_path, seg, config({"interfaces": [
        {"name": "n0", "addresses": [{"static": "2001:db8::10/64"}]}]}, endpoint=None))
    assert accept_ra(seg, "n0") == 0
    assert "IPv6AcceptRA=no" in (tmp_path / f"{NETWORKD}-n0.network").read_text()


def test_router_advertisements_asked_for_are_accepted_live_while_forwarding(
        seg: Segment, tmp_path: Path) -> None:
    run_phase(tmp_path, seg, config({"interfaces": [
        {"name": "n0", "acceptRA": True, "addresses": [{"static": "192.0.2.10/24"}]}]},
        endpoint=None))
    assert accept_ra(seg, "n0") == 2
    assert "IPv6AcceptRA=yes" in (tmp_path / f"{NETWORKD}-n0.network").read_text()


def test_an_on_link_route_outside_the_subnets_is_made_live_as_the_files_say(
        seg: Segment, tmp_path: Path) -> None:
    # the kernel refuses a next hop outside the link's subnets unless it is marked onlink
    cfg = config({"interfaces": [
        {"name": "n0", "addresses": [{"static": "192.0.2.10/24"}],
         "routes": [{"to": "203.0.113.0/24", "via": "198.51.100.1", "onLink": True}]}]},
        endpoint=None)
    run_phase(tmp_path, seg, cfg)
    assert "203.0.113.0/24 via 198.51.100.1 dev n0 proto static onlink" in \
        seg.node_ip("route", "show")
    assert "GatewayOnLink=yes" in (tmp_path / f"{NETWORKD}-n0.network").read_text()
    assert run_phase(tmp_path, seg, cfg).result.netlink_changes == 0


def test_a_name_glob_finds_its_one_link_live_as_networkds_name_match_does(
        seg: Segment, tmp_path: Path) -> None:
    # netplan's usual cloud image entry: match: {name: "en*"}; networkd's Name= globs
    seg.listen()
    cfg = config({"renderer": "networkd", "interfaces": [
        {"name": "uplink", "match": {"name": "n[0-9]*"}, "gateway": GATEWAY,
         "addresses": [{"static": "192.0.2.10/24"}]}]})
    run_phase(tmp_path, seg, cfg)
    assert "inet 192.0.2.10/24" in seg.node_ip("addr", "show", "n0")
    assert "\nName=n[0-9]*\n" in (tmp_path / f"{NETWORKD}-uplink.network").read_text()
    again = run_phase(tmp_path, seg, cfg)
    assert again.result.netlink_changes == 0 and again.effects == 0


def test_a_name_glob_that_finds_two_links_is_refused_naming_them(
        seg: Segment, tmp_path: Path) -> None:
    seg.node_ip("link", "add", "n1", "type", "veth", "peer", "name", "x1")
    cfg = config({"interfaces": [{"name": "uplink", "match": {"name": "n*"},
                                  "addresses": [{"static": "192.0.2.10/24"}]}]},
                 endpoint=None)
    with pytest.raises(AgentError) as info:
        run_phase(tmp_path, seg, cfg)
    assert info.value.reason == Reason.InterfaceNotFound
    assert "2 links (n0, n1) match name glob n*" in info.value.message
    assert "inet 192.0.2.10" not in seg.node_ip("addr", "show")
