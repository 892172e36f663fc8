"""One meaning, three paths, proved by the real tools: for each golden configuration, the
kernel state the agent's live apply makes (`machine-agent --netns NS run`) is the state
real systemd-networkd 252 makes from the agent's networkd files, and the state it makes
from `netplan generate`'s output of the agent's netplan file; networkd and netplan say
nothing (no warning) about the files. Each path runs in its own fresh site (realnet.py).

Bonds and VLANs cannot be made by this kernel (no bonding, no 8021q): their live path
must end in KernelFeatureMissing naming the module; the qemu boot test
(tests/e2e/test_image_bond_boot.py) proves them in a kernel that has both."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.network.realnet import (
    accept_ra,
    agent_run,
    differences,
    interfaces,
    kernel_state,
    netplan_generate,
    networkd,
    on_veths,
    site,
)

pytestmark = pytest.mark.allow_processes

GOLDEN = Path(__file__).parents[2] / "unit" / "network" / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "input.yaml").exists())
KERNEL_MODULE = {"bond": "bonding", "vlan": "8021q"}
"""Link kinds this kernel cannot make, and the module a kernel needs for them."""


NETPLAN_SCOPE = re.compile(r"Scope= is specified for IPv6 route. It will be ignored.$")
"""netplan 0.106 writes Scope=link for every route without a next hop, IPv6 ones too (its
own output, whatever the YAML says: `netplan generate` of a bare `to:` does it), and
networkd says it ignores it; the route is the same."""


def golden(case: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((GOLDEN / case / "input.yaml").read_text())
    return doc


def missing_modules(doc: dict[str, Any]) -> set[str]:
    return {KERNEL_MODULE[e["type"]] for e in interfaces(doc)
            if e.get("type") in KERNEL_MODULE}


def wanted_links(doc: dict[str, Any]) -> dict[str, bool]:
    """Every link the configuration names, and whether it uses DHCP."""
    return {e["name"]: any("dhcp" in a for a in e.get("addresses", []))
            for e in interfaces(doc)}


def live_state(doc: dict[str, Any], work: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The kernel state and accept_ra after the agent's live apply (NICs found by name:
    see on_veths)."""
    with site(doc) as s:
        done = agent_run(work / "live", on_veths(doc), "networkd", netns=s.node)
        assert done.returncode == 0, done.stdout + done.stderr
        return kernel_state(s), accept_ra(s)


def networkd_state(doc: dict[str, Any], work: Path, **files: Path) -> tuple[
        dict[str, Any], dict[str, str], list[str]]:
    with site(doc) as s, networkd(s, work, wanted_links(doc), **files) as run:
        return kernel_state(s), accept_ra(s), run.diagnostics


def differential(doc: dict[str, Any], work: Path) -> dict[str, Any]:
    """The three paths' states (and networkd's diagnostics) for `doc`."""
    live, live_ra = live_state(doc, work)
    done = agent_run(work / "nd", doc, "networkd")  # the files of `doc` itself, by MAC
    assert done.returncode == 0, done.stdout + done.stderr
    nd, nd_ra, nd_said = networkd_state(doc, work / "networkd",
                                        etc_files=work / "nd/etc/systemd/network")
    out = {"live": live, "networkd": nd, "networkd_said": nd_said,
           "ra": {"live": live_ra, "networkd": nd_ra}}
    if not any(e.get("type") == "macvlan" for e in interfaces(doc)):  # netplan has none
        done = agent_run(work / "np", doc, "netplan")
        assert done.returncode == 0, done.stdout + done.stderr
        np, np_ra, np_said = networkd_state(doc, work / "netplan-networkd",
                                            run_files=netplan_generate(work / "np"))
        out.update(netplan=np, netplan_said=[m for m in np_said if not NETPLAN_SCOPE.search(m)])
        out["ra"]["netplan"] = np_ra
    return out


def without_kernel_choices(state: dict[str, Any]) -> dict[str, Any]:
    """The state without what the agent leaves to the kernel or networkd on purpose:
    IPv6 link-local addresses (they follow the MAC and the carrier's timing; networkd
    gives bridge ports none). IPv4 broadcast addresses are compared (the live apply
    gives the subnet's, as networkd does)."""
    links = {name: {k: v for k, v in entry.items() if k != "ipv6_link_local"}
             for name, entry in state["links"].items()}
    return {**state, "links": links}


def same(first: dict[str, Any], second: dict[str, Any]) -> None:
    lines = differences(first, second)
    assert not lines, "\n".join(lines)


_seen: dict[str, dict[str, Any]] = {}


def states(case: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each case's paths run once for the tests that compare them."""
    if case not in _seen:
        _seen[case] = differential(golden(case), tmp_path_factory.mktemp(case))
    return _seen[case]


RUNNABLE = [c for c in CASES if not missing_modules(golden(c))]
UNMAKEABLE = [c for c in CASES if missing_modules(golden(c))]


def test_the_corpus_is_the_golden_one() -> None:
    assert set(RUNNABLE) >= {"single-nic-static", "dual-stack", "bridge-with-members",
                             "extra-routes", "several-dns"}
    assert "vlan-on-bond" in UNMAKEABLE


@pytest.mark.parametrize("case", RUNNABLE)
def test_networkd_makes_what_the_live_apply_makes(
        case: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    got = states(case, tmp_path_factory)
    assert got["networkd_said"] == []
    same(without_kernel_choices(got["live"]), without_kernel_choices(got["networkd"]))


@pytest.mark.parametrize("case", RUNNABLE)
def test_netplan_through_networkd_makes_what_the_live_apply_makes(
        case: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    got = states(case, tmp_path_factory)
    assert got["netplan_said"] == []
    same(without_kernel_choices(got["live"]), without_kernel_choices(got["netplan"]))


@pytest.mark.parametrize("case", RUNNABLE)
def test_both_renderers_set_router_advertisements_alike(
        case: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    ra = states(case, tmp_path_factory)["ra"]
    same(ra["networkd"], ra["netplan"])
    static = [e["name"] for e in interfaces(golden(case))
              if not any(a.get("dhcp") == "ipv6" for a in e.get("addresses", []))]
    assert {name: ra["networkd"][name] for name in static} == dict.fromkeys(static, "0")


def wants_router_advertisements(doc: dict[str, Any]) -> set[str]:
    """The links whose configuration takes router advertisements: acceptRA true, or
    not given on a link left to DHCPv6 (as both renderers and the live apply read it)."""
    return {e["name"] for e in interfaces(doc)
            if e.get("acceptRA", any(a.get("dhcp") == "ipv6" for a in e.get("addresses", [])))}


@pytest.mark.parametrize("case", RUNNABLE)
def test_the_live_apply_takes_router_advertisements_where_the_files_do(
        case: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The same meaning, not the same sysctl: networkd takes advertisements itself
    (IPv6AcceptRA=) and leaves the kernel's accept_ra at 0 on every link it manages; the
    live apply has no daemon to take them, so the kernel does where they are wanted
    (accept_ra 2, or the kernel's own 1 on a DHCPv6 link without acceptRA: either takes
    them on a node that does not forward) and nowhere else (0)."""
    ra = states(case, tmp_path_factory)["ra"]
    wanted = wants_router_advertisements(golden(case))
    assert set(ra["networkd"].values()) == {"0"}, ra["networkd"]
    assert set(ra["live"]) == set(ra["networkd"])
    assert {name for name, value in ra["live"].items() if value != "0"} == wanted, ra["live"]


@pytest.mark.parametrize("case", RUNNABLE)
def test_ipv4_addresses_carry_the_subnet_broadcast_on_every_path(
        case: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    got = states(case, tmp_path_factory)
    assert {a for a in got["networkd"]["addresses"] if ":" not in a[1]} == \
        {a for a in got["netplan"]["addresses"] if ":" not in a[1]}
    assert {a for a in got["live"]["addresses"] if ":" not in a[1]} == \
        {a for a in got["networkd"]["addresses"] if ":" not in a[1]}


@pytest.mark.parametrize("case", UNMAKEABLE)
def test_live_apply_names_the_missing_kernel_module(case: str, tmp_path: Path) -> None:
    doc = on_veths(golden(case))
    with site(doc) as s:
        before = kernel_state(s)
        done = agent_run(tmp_path / "live", doc, "networkd", netns=s.node)
        said = done.stdout + done.stderr
        assert done.returncode != 0, said
        assert "KernelFeatureMissing" in said, said
        assert any(module in said for module in missing_modules(doc)), said
        assert kernel_state(s) == before  # nothing half-applied
    assert not (tmp_path / "live/etc/systemd/network").exists()


def test_a_bridge_mtu_its_ports_lack_is_refused_and_one_they_share_is_kept(
        tmp_path: Path) -> None:
    # networkd sets a bridge's MTU when it creates it, before the ports join, and the
    # kernel then moves it to theirs (measured here: 1500 from networkd, 1280 live), so
    # validation refuses the one the ports do not carry; one they carry holds on all paths
    lone = {"interfaces": [{"name": "eth0"},
                           {"name": "br0", "type": "bridge", "bridge": {"members": ["eth0"]},
                            "mtu": 1280, "addresses": [{"static": "192.0.2.10/24"}]}]}
    for renderer in ("networkd", "netplan"):
        done = agent_run(tmp_path / renderer, lone, renderer)
        assert done.returncode != 0
        assert "interfaces[1].mtu: 1280 is below the MTU of its member eth0 (1500)" in \
            done.stdout + done.stderr
        assert not (tmp_path / renderer / "etc").exists()
    shared = {"interfaces": [{**lone["interfaces"][0], "mtu": 1280}, lone["interfaces"][1]]}
    got = differential(shared, tmp_path / "shared")
    for path in ("live", "networkd", "netplan"):
        assert got[path]["links"]["br0"]["mtu"] == got[path]["links"]["eth0"]["mtu"] == 1280
    same(without_kernel_choices(got["live"]), without_kernel_choices(got["networkd"]))
    same(without_kernel_choices(got["live"]), without_kernel_choices(got["netplan"]))


def test_an_stp_bridge_with_ipv6_and_gateways_is_applied_live_as_networkd_applies_it(
        tmp_path: Path) -> None:
    # with STP the ports listen and learn for 2 x 4 s before the bridge has carrier: no
    # DAD completes and no gateway answers before then, longer than the 5 s DAD wait
    # (FAST) — networkd waits it out, and so must the live apply
    doc = {"interfaces": [
        {"name": "eth0"},
        {"name": "br0", "type": "bridge",
         "bridge": {"members": ["eth0"], "stp": True, "forwardDelay": 4},
         "addresses": [{"static": "192.0.2.10/24"}, {"static": "2001:db8::10/64"}],
         "gateway": "192.0.2.1", "gateway6": "2001:db8::1"}]}
    got = differential(doc, tmp_path)
    assert got["live"]["links"]["br0"]["stp_state"] == 1
    assert ("br0", "2001:db8::10/64") in {a[:2] for a in got["live"]["addresses"]}
    same(without_kernel_choices(got["live"]), without_kernel_choices(got["networkd"]))
    same(without_kernel_choices(got["live"]), without_kernel_choices(got["netplan"]))


def match_section(text: str) -> dict[str, str]:
    section = text.split("[Match]", 1)[1].split("\n[", 1)[0]
    return dict(line.split("=", 1) for line in section.strip().splitlines())


def test_a_nic_found_by_mac_is_matched_alike_by_both_renderers(tmp_path: Path) -> None:
    # by its permanent MAC: the current one (MACAddress=) is also a VLAN's, and a bond's
    # or bridge's that took the NIC's, so two .network files matched one link
    doc = golden("dual-stack")
    assert agent_run(tmp_path / "nd", doc, "networkd").returncode == 0
    assert agent_run(tmp_path / "np", doc, "netplan").returncode == 0
    ours = match_section((tmp_path / "nd/etc/systemd/network/10-machine-agent-eno1.network")
                         .read_text())
    (theirs_file,) = netplan_generate(tmp_path / "np").glob("*-eno1.network")
    theirs = match_section(theirs_file.read_text())
    assert ours.get("PermanentMACAddress") == theirs.get("PermanentMACAddress") == \
        "52:54:00:ab:cd:01"
    assert "MACAddress" not in ours


V2 = Path(__file__).parent / "network-config-v2"
"""The same networks as the user writes them (cloud-init network-config v2), by case."""


def cloud_init_netplan(case: str, root: Path) -> Path:
    """cloud-init's own netplan of the v2 file (`cloud-init devel net-convert`) under
    ROOT/etc/netplan, as cloud-init would leave it on a node."""
    proc = subprocess.run(
        ["cloud-init", "devel", "net-convert", "-p", str(V2 / f"{case}.yaml"), "-k", "yaml",
         "-d", str(root), "-D", "debian", "-O", "netplan"],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    # cloud-init 22.4 writes it world-readable, which netplan warns about (later
    # cloud-init writes 0600, as the agent does: its own netplan file passes unchanged)
    (root / "etc/netplan/50-cloud-init.yaml").chmod(0o600)
    return root


@pytest.mark.parametrize("case", [c for c in RUNNABLE if (V2 / f"{c}.yaml").exists()])
def test_the_users_v2_through_cloud_init_makes_what_the_live_apply_makes(
        case: str, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    live = states(case, tmp_path_factory)["live"]
    doc = golden(case)
    generated = netplan_generate(cloud_init_netplan(case, tmp_path / "ci"))
    with site(doc) as s, networkd(s, tmp_path / "networkd", wanted_links(doc),
                                  run_files=generated) as run:
        said = [m for m in run.diagnostics if not NETPLAN_SCOPE.search(m)]
        theirs = kernel_state(s)
    assert said == []
    same(without_kernel_choices(live), without_kernel_choices(theirs))


def test_bridge_ports_and_an_empty_bridge_get_the_link_local_addresses_networkd_gives(
        tmp_path: Path) -> None:
    # networkd gives a bridge port no IPv6 link-local address (addrgenmode none), and
    # creates a bridge with its own MAC, which leaves a bridge without ports without
    # carrier, hence without one; the live apply does both, with networkd's MAC
    doc = {"interfaces": [
        {"name": "eth0"},
        {"name": "eth1", "addresses": [{"static": "198.51.100.10/24"}]},
        {"name": "br0", "type": "bridge", "bridge": {"members": ["eth0"]},
         "addresses": [{"static": "192.0.2.10/24"}]},
        {"name": "br1", "type": "bridge", "bridge": {"members": []},
         "addresses": [{"static": "203.0.113.10/24"}]}]}
    got = differential(doc, tmp_path)
    for path in ("live", "networkd", "netplan"):
        links = got[path]["links"]
        assert not links["eth0"]["ipv6_link_local"], path
        assert not links["br1"]["ipv6_link_local"], path
    for bridge in ("br0", "br1"):
        assert got["live"]["links"][bridge]["mac"] == got["networkd"]["links"][bridge]["mac"] \
            == got["netplan"]["links"][bridge]["mac"]
    assert got["networkd_said"] == got["netplan_said"] == []
    same(without_kernel_choices(got["live"]), without_kernel_choices(got["networkd"]))
    same(without_kernel_choices(got["live"]), without_kernel_choices(got["netplan"]))


def test_link_local_off_optional_and_privacy_mean_the_same_on_every_path(
        tmp_path: Path) -> None:
    # link-local: [] is addrgenmode none live, LinkLocalAddressing=no in the files;
    # optional and ipv6-privacy change no kernel state here (no wait-online, no RA) and
    # networkd must take the files without a word
    doc = {"interfaces": [
        {"name": "eth0", "linkLocal": [], "optional": True, "ipv6Privacy": True,
         "addresses": [{"static": "192.0.2.10/24"}, {"static": "2001:db8::10/64"}]},
        {"name": "eth1", "linkLocal": ["ipv6"],
         "addresses": [{"static": "198.51.100.10/24"}]}]}
    got = differential(doc, tmp_path)
    for path in ("live", "networkd", "netplan"):
        assert not got[path]["links"]["eth0"]["ipv6_link_local"], path
    assert got["networkd"]["links"]["eth1"]["ipv6_link_local"]
    assert got["networkd_said"] == got["netplan_said"] == []
    same(without_kernel_choices(got["live"]), without_kernel_choices(got["networkd"]))
    same(without_kernel_choices(got["live"]), without_kernel_choices(got["netplan"]))
