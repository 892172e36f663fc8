"""The user's story end to end, in a network namespace: `plan` says which address would
come from which pool, `run` puts addresses from NetBox, Nautobot and IPAddressClaims on
the node's interface, and `reset` gives the NetBox and Nautobot addresses back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from agent import cli
from agent.config import default_sources, load_config
from agent.host import Host
from agent.ipam.nautobot import CLAIM_FIELD as NAUTOBOT_CLAIM_FIELD
from agent.orchestrator import Orchestrator
from agent.phases.network import NetworkPhase
from agent.session import open_session
from tests.integration.ipam.backends import NAUTOBOT_TOKEN_FILE, TOKEN_FILE, netbox_settings
from tests.integration.ipam.conftest import Management, NetBox
from tests.integration.kube.conftest import World, bootstrap_secret, make_node
from tests.integration.nautobot.world import Nautobot
from tests.integration.network.segment import FAST, GATEWAY, MANAGEMENT, Segment, segment

pytestmark = pytest.mark.allow_processes
MACHINE_ID = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def seg() -> Iterator[Segment]:
    with segment() as s:
        s.listen()  # the management endpoint the phase checks, behind the gateway
        yield s


def network(plugin: str, pool: str) -> dict[str, object]:
    return {"conflictDetection": FAST, "verify": {"timeout": "3s",
                                                  "managementEndpoint": MANAGEMENT},
            "hostname": "worker-0.example.net",
            "interfaces": [{"name": "n0", "addresses": [
                {"ipam": {"plugin": plugin, "pool": pool}}]}]}


def write(root: Path, path: str, doc: dict[str, object]) -> None:
    Host(root).write_file(path, yaml.safe_dump(doc))


def agent_config(spec: dict[str, object]) -> dict[str, object]:
    return {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig", "spec": spec}


def test_plan_run_and_reset_with_an_address_from_netbox(
        tmp_path: Path, seg: Segment, netbox: NetBox,
        capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "node"
    Host(root).write_file("/etc/machine-id", MACHINE_ID + "\n")
    Host(root).write_file(TOKEN_FILE, netbox.token)
    write(root, "/etc/machine-agent/config.yaml", agent_config({
        "network": network("netbox", "v4"),
        "ipam": {"plugins": {"netbox": netbox_settings(netbox.url)}}}))

    assert cli.main(["--root", str(root), "plan", "--only", "network"]) == 0
    shown = capsys.readouterr().out
    assert "* claim an ipv4 address for n0 from pool 'v4' (IPAM plugin netbox)" in shown
    assert netbox.addresses(**{"cf_machine_agent_claim_key__empty": "false"}) == []

    host = Host(root, netns=seg.node)
    result = Orchestrator(load_config(host, default_sources()), host,
                          phases=[NetworkPhase()]).run()
    assert result.ok, result.outcomes
    # the first address NetBox hands out: .1 is the gateway, reserved, never handed out
    assert "inet 192.0.2.2/24" in seg.node_ip("addr", "show", "n0")
    assert f"default via {GATEWAY} dev n0" in seg.node_ip("route", "show")
    (row,) = [r for r in netbox.addresses(address="192.0.2.2")
              if r["custom_fields"]["machine_agent_claim_key"]  # type: ignore[index]
              == f"{MACHINE_ID}/n0/ipv4"]
    assert row["dns_name"] == "worker-0.example.net"

    assert cli.main(["--root", str(root), "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["phases"]["network"]["result"]["claimed"][0]["address"] == "192.0.2.2/24"

    assert cli.main(["--root", str(root), "reset"]) == 0
    assert "released 192.0.2.2/24 of n0 (netbox pool 'v4')" in capsys.readouterr().out
    assert netbox.addresses(address="192.0.2.2") == []
    assert cli.main(["--root", str(root), "reset"]) == 0  # nothing left: still fine
    assert "nothing to release" in capsys.readouterr().out


def test_plan_run_and_reset_with_an_address_from_nautobot(
        tmp_path: Path, seg: Segment, nautobot: Nautobot,
        capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "node"
    Host(root).write_file("/etc/machine-id", MACHINE_ID + "\n")
    Host(root).write_file(NAUTOBOT_TOKEN_FILE, nautobot.token)
    write(root, "/etc/machine-agent/config.yaml", agent_config({
        "network": network("nautobot", "v4"),
        "ipam": {"plugins": {"nautobot": {
            "url": nautobot.url, "tokenFile": NAUTOBOT_TOKEN_FILE, "timeout": "30s",
            "pools": {"v4": {"prefix": "192.0.2.0/24"}}}}}}))
    key = f"{MACHINE_ID}/n0/ipv4"

    assert cli.main(["--root", str(root), "plan", "--only", "network"]) == 0
    shown = capsys.readouterr().out
    assert "* claim an ipv4 address for n0 from pool 'v4' (IPAM plugin nautobot)" in shown
    assert not [r for r in nautobot.addresses()
                if (r.get("custom_fields") or {}).get(NAUTOBOT_CLAIM_FIELD) == key]

    host = Host(root, netns=seg.node)
    result = Orchestrator(load_config(host, default_sources()), host,
                          phases=[NetworkPhase()]).run()
    assert result.ok, result.outcomes
    (row,) = [r for r in nautobot.addresses()
              if (r.get("custom_fields") or {}).get(NAUTOBOT_CLAIM_FIELD) == key]
    address = str(row["address"])
    assert address.startswith("192.0.2.") and address != "192.0.2.1/24"  # not the gateway
    assert f"inet {address}" in seg.node_ip("addr", "show", "n0")
    assert f"default via {GATEWAY} dev n0" in seg.node_ip("route", "show")
    assert row["dns_name"] == "worker-0.example.net"

    assert cli.main(["--root", str(root), "reset"]) == 0
    assert f"released {address} of n0 (nautobot pool 'v4')" in capsys.readouterr().out
    assert not [r for r in nautobot.addresses()
                if (r.get("custom_fields") or {}).get(NAUTOBOT_CLAIM_FIELD) == key]


def test_run_with_an_address_from_an_ipaddressclaim(
        tmp_path: Path, seg: Segment, management: Management) -> None:
    root = tmp_path / "node"
    world = World(root, "203.0.113.10:6443")
    admin = management.admin
    admin.create(f"/api/v1/namespaces/{admin.ns}/secrets",
                 bootstrap_secret(admin.ns, world.endpoint))
    make_node(world, admin, management.token)
    pool = management.pool("workers", ["192.0.2.20-192.0.2.29"], 24, gateway=GATEWAY)
    write(root, "/etc/machine-agent/config.d/50-network.yaml", agent_config({
        "network": network("capi", "workers"),
        "ipam": {"plugins": {"capi": {"timeout": "10s", "pools": {
            "workers": {"name": pool}}}}}}))

    host = Host(root, netns=seg.node)
    session = open_session(host)
    result = session.orchestrator(host, phases=[NetworkPhase()]).run()
    assert result.ok, result.outcomes
    assert "inet 192.0.2.20/24" in seg.node_ip("addr", "show", "n0")
    assert f"default via {GATEWAY} dev n0" in seg.node_ip("route", "show")
    (claim,) = management.claims()
    assert claim["metadata"]["ownerReferences"][0]["uid"] == (  # type: ignore[index]
        session.machine.facts.uid if session.machine else None)
    conditions = admin.conditions()
    assert conditions["NetworkReady"]["status"] == "True"
