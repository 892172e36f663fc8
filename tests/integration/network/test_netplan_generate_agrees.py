"""The keys this kernel cannot show live (a bond's delays and minimum links: no bonding
module here; the qemu boot test has one) and those that change no kernel state in a
test (optional, DHCP's MTU): `netplan generate` of the agent's netplan file writes what
the agent's own networkd files say, key for key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.network.realnet import agent_run, netplan_generate
from tests.unit.hostile.test_renderer_roundtrip import ini_values, parse_systemd

pytestmark = pytest.mark.allow_processes

DOC = {"interfaces": [
    {"name": "eth0", "addresses": [{"dhcp": "ipv4"}], "optional": True, "ipv6Privacy": True,
     "linkLocal": []},
    {"name": "eth1"}, {"name": "eth2"},
    {"name": "bond0", "type": "bond",
     "bond": {"members": ["eth1", "eth2"], "mode": "active-backup", "miimon": 100,
              "upDelay": 200, "downDelay": 100, "minLinks": 1, "primary": "eth1"}},
    {"name": "bond0.5", "type": "vlan", "vlan": {"id": 5, "parent": "bond0"},
     "addresses": [{"static": "192.0.2.10/24"}]}]}


def files(tmp_path: Path) -> tuple[Path, Path]:
    for renderer in ("networkd", "netplan"):
        done = agent_run(tmp_path / renderer, DOC, renderer)
        assert done.returncode == 0, done.stdout + done.stderr
    return (tmp_path / "networkd/etc/systemd/network",
            netplan_generate(tmp_path / "netplan"))


def read(directory: Path, name: str, ext: str) -> list[tuple[str, list[tuple[str, str]]]]:
    (found,) = directory.glob(f"*-{name}.{ext}")
    return parse_systemd(found.read_text())


def test_bond_delays_and_min_links_are_what_netplan_writes(tmp_path: Path) -> None:
    ours, theirs = files(tmp_path)
    for key in ("Mode", "MinLinks", "UpDelaySec", "DownDelaySec"):
        assert ini_values(read(ours, "bond0", "netdev"), "Bond", key) == \
            ini_values(read(theirs, "bond0", "netdev"), "Bond", key) != [], key
    for name in ("bond0", "bond0.5"):
        assert ini_values(read(ours, name, "network"), "Network",
                          "ConfigureWithoutCarrier") == ["yes"]
        assert ini_values(read(theirs, name, "network"), "Network",
                          "ConfigureWithoutCarrier") == ["yes"]


def test_optional_privacy_link_local_and_dhcp_mtu_are_what_netplan_writes(
        tmp_path: Path) -> None:
    ours, theirs = files(tmp_path)
    mine, netplans = read(ours, "eth0", "network"), read(theirs, "eth0", "network")
    assert ini_values(mine, "Link", "RequiredForOnline") == \
        ini_values(netplans, "Link", "RequiredForOnline") == ["no"]
    for key in ("LinkLocalAddressing", "IPv6PrivacyExtensions"):
        assert ini_values(mine, "Network", key) == ini_values(netplans, "Network", key), key
    assert ini_values(mine, "DHCPv4", "UseMTU") == ["true"]
    assert ini_values(netplans, "DHCP", "UseMTU") == ["true"]  # netplan's older section
    for member in ("eth1", "eth2"):  # no link-local address on a bond member, either way
        assert ini_values(read(theirs, member, "network"), "Network",
                          "LinkLocalAddressing") == ["no"]
