"""Differential test against cloud-init's own netplan renderer: the same network, written
once as network-config v2 and once as `spec.network`, must mean the same netplan.

cloud-init (Debian's package, in the system Python) is run through its CLI,
`cloud-init devel net-convert`; a missing cloud-init fails this test (CI installs it)."""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.phases.network.model import build_plan
from agent.phases.network.render import NETPLAN_FILE, render_netplan
from tests.unit.network.netconfig import network_spec

V2 = Path(__file__).parent / "network-config-v2"
GOLDEN = Path(__file__).parents[2] / "unit" / "network" / "golden"
CASES = sorted(p.stem for p in V2.glob("*.yaml"))

NETPLAN_DEFAULTS: dict[str, Any] = {"dhcp4": False, "dhcp6": False}
"""Keys whose value is netplan's own default: saying them or not means the same."""


def normalise(doc: dict[str, Any]) -> dict[str, Any]:
    """Netplan's meaning, not its spelling: defaults dropped, addresses and MACs in one
    notation, routes as a set."""
    net = dict(doc["network"])
    if net.get("renderer") == "networkd":  # netplan's default renderer
        del net["renderer"]
    out: dict[str, Any] = {"version": net.pop("version")}
    for section, entries in net.items():
        out[section] = {}
        for name, entry in entries.items():
            e = {k: v for k, v in entry.items() if NETPLAN_DEFAULTS.get(k, object()) != v}
            if "addresses" in e:
                e["addresses"] = sorted(str(ipaddress.ip_interface(a)) for a in e["addresses"])
            if "routes" in e:
                e["routes"] = sorted(
                    tuple(sorted((k, str(v)) for k, v in route.items())) for route in e["routes"])
            if "match" in e and "macaddress" in e["match"]:
                e["match"] = {"macaddress": e["match"]["macaddress"].lower()}
            out[section][str(name)] = e
    return out


def test_differential_corpus_is_not_empty() -> None:
    assert len(CASES) >= 5


@pytest.mark.allow_processes
@pytest.mark.parametrize("case", CASES)
def test_agent_netplan_means_what_cloud_init_renders(case: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        ["cloud-init", "devel", "net-convert", "-p", str(V2 / f"{case}.yaml"), "-k", "yaml",
         "-d", str(out), "-D", "debian", "-O", "netplan"],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    theirs = yaml.safe_load((out / "etc/netplan/50-cloud-init.yaml").read_text())
    spec = network_spec(yaml.safe_load((GOLDEN / case / "input.yaml").read_text()))
    ours = yaml.safe_load(render_netplan(build_plan(spec))[NETPLAN_FILE])
    assert normalise(ours) == normalise(theirs)
