"""Bonds, VLANs and bridges in a real kernel: the golden image boots under qemu with two
more virtio NICs (images/boot.sh EXTRA_NICS=2), the agent applies an active-backup bond
of them, a VLAN on the bond and a bridge over the VLAN live (machine-agent run --only
network; the guest's Debian kernel has bonding and 8021q as modules, which this host's
kernel lacks), the guest reboots, and systemd-networkd alone recreates them from the
agent's files: the same links, MTUs, masters, addresses and routes with their metrics.

The guest files (tests/e2e/guest-bond/) mask machine-agent.service, so nothing but the
proof runs; bond-proof.sh keeps the kernel state of the first boot, reboots, and prints
both states on the serial console after the second. One qemu process, two boots."""

from __future__ import annotations

import base64
import ipaddress
import json
import time
from pathlib import Path
from typing import Any

import pytest
from machine_agent_sandbox.testkit.guest_image import ANSI, run_logged

from tests.integration.network.realnet import differences, state_of
from tests.integration.network.test_real_networkd import without_kernel_choices

GUEST = Path(__file__).parent / "guest-bond"
BUDGET = 600
"""Seconds for the build and both boots."""
BOOT_RESERVE = 300
"""Of the budget, what a build may not take: two boots under software emulation."""
FILES = {f"10-machine-agent-{name}.{ext}" for name in ("eth1", "eth2", "bond0", "bond0.100",
                                                        "br0") for ext in ("network",)} | {
    f"10-machine-agent-{name}.netdev" for name in ("bond0", "bond0.100", "br0")}
pytestmark = pytest.mark.allow_processes


@pytest.fixture(scope="module")
def proof(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What bond-proof.sh printed after the second boot, by name."""
    work = tmp_path_factory.mktemp("bond-image")
    started = time.monotonic()
    run_logged(["bash", "images/build.sh", "image", "--out", str(work / "image"),
                "--overlay", str(GUEST), "--enable", "bond-proof.service"],
               work / "build.log", BUDGET - BOOT_RESERVE)
    built = time.monotonic()
    serial = work / "console.log"
    run_logged(["env", "EXTRA_NICS=2", "REBOOT=yes", "bash", "images/boot.sh",
                str(work / "image"), str(serial), "systemd.show_status=false", "loglevel=3"],
               work / "qemu.log", BUDGET - (built - started))
    print(f"\nimage build {built - started:.0f}s, two boots {time.monotonic() - built:.0f}s")
    (work / "image" / "rootfs.raw").unlink()  # 3 GB (sparse) that no one reads again
    return printed(serial.read_text(errors="replace"))


def printed(console: str) -> dict[str, str]:
    lines = [ANSI.sub("", line).rstrip("\r") for line in console.splitlines()]
    assert "BOND-PROOF-END" in lines, "\n".join(lines[-80:])
    out = {}
    for line in lines:
        if line.startswith("BOND-PROOF "):
            _, name, data = [*line.split(" ", 2), ""][:3]
            out[name] = base64.b64decode(data).decode()
    return out


def state(proof: dict[str, str], boot: str) -> dict[str, Any]:
    kinds = ("link", "addr", "route4", "route6")
    return state_of({k: proof[f"{boot}.{k}"] for k in kinds}, [])


def test_the_agent_applied_bond_vlan_and_bridge_live(proof: dict[str, str]) -> None:
    assert proof["agent.exit"].strip() == "0", proof["agent.log"]
    live = state(proof, "live")["links"]
    assert live["bond0"]["kind"] == "bond" and live["bond0"]["mode"] == "active-backup"
    assert live["bond0"]["mtu"] == 9000
    assert live["eth1"]["master"] == live["eth2"]["master"] == "bond0"
    assert live["eth1"]["mtu"] == live["eth2"]["mtu"] == 9000
    vlan = live["bond0.100"]
    assert (vlan["kind"], vlan["mode"], vlan["parent"], vlan["mtu"], vlan["master"]) == (
        "vlan", 100, "bond0", 1500, "br0")
    assert live["br0"]["kind"] == "bridge" and live["br0"]["up"]
    assert set(proof["files"].split()) == FILES


def test_the_addresses_and_routes_with_metrics_were_applied_live(
        proof: dict[str, str]) -> None:
    live = state(proof, "live")
    assert {a[:2] for a in live["addresses"]} >= {("br0", "198.51.100.30/24"),
                                                  ("br0", "2001:db8:64::30/64")}
    routes = [json.loads(r) for r in live["routes"]]
    assert {(r["dst"], r["gateway"], r["dev"], r["metric"]) for r in routes} >= {
        ("203.0.113.0/24", "198.51.100.254", "br0", 50),
        ("2001:db8:ff::/48", "2001:db8:64::fe", "br0", 300)}


def from_router_advertisements(proof: dict[str, str], boot: str) -> dict[str, Any]:
    """What the kernel took from router advertisements (qemu's user-mode network sends
    them on every NIC): SLAAC addresses (dynamic), routes of protocol ra, and the prefix
    routes of those addresses."""
    learned = [(link["ifname"], f"{a['local']}/{a['prefixlen']}")
               for link in json.loads(proof[f"{boot}.addr"]) for a in link.get("addr_info", [])
               if a.get("dynamic")]
    prefixes = {(name, str(ipaddress.ip_interface(a).network)) for name, a in learned}
    routes = [r for r in state(proof, boot)["routes"]
              if (route := json.loads(r))["protocol"] == "ra"
              or (route["dev"], route["dst"]) in prefixes]
    return {"addresses": learned, "routes": routes}


def without_router_advertisements(proof: dict[str, str], boot: str) -> dict[str, Any]:
    got = without_kernel_choices(state(proof, boot))
    learned = from_router_advertisements(proof, boot)
    return {**got, "addresses": [a for a in got["addresses"]
                                 if tuple(a[:2]) not in learned["addresses"]],
            "routes": [r for r in got["routes"] if r not in learned["routes"]]}


def test_networkd_recreates_the_same_state_after_the_reboot(proof: dict[str, str]) -> None:
    assert proof["wait.exit"].strip() == "0", proof["wait.log"]
    lines = differences(without_router_advertisements(proof, "live"),
                        without_router_advertisements(proof, "boot"))
    assert not lines, "\n".join(lines)


def test_networkd_takes_nothing_from_router_advertisements(proof: dict[str, str]) -> None:
    assert from_router_advertisements(proof, "boot") == {"addresses": [], "routes": []}


def test_the_live_apply_takes_nothing_from_router_advertisements(
        proof: dict[str, str]) -> None:
    assert from_router_advertisements(proof, "live") == {"addresses": [], "routes": []}
