"""The delete policy the daemon runs when its Machine is deleted gives the address the
network phase claimed from the real Nautobot back: the address is gone from Nautobot, the
AddressesReleased condition names it, and the node's ledger no longer holds it."""

from __future__ import annotations

from pathlib import Path

import yaml

from agent.config import load_config
from agent.config.sources import default_sources
from agent.daemon.deletion import DeletePolicy
from agent.host import Host
from agent.ipam.base import ClaimRequest, PluginEnv, open_plugin
from agent.ipam.ledger import held, record
from agent.ipam.nautobot import CLAIM_FIELD
from agent.phases.base import Results
from agent.report import Conditions
from agent.state import Journal
from tests.integration.nautobot.world import Nautobot

TOKEN_FILE = "/etc/machine-agent/nautobot.token"


def claims(nautobot: Nautobot) -> list[str]:
    return [str(r["address"]) for r in nautobot.addresses()
            if (r.get("custom_fields") or {}).get(CLAIM_FIELD)]


def test_the_machines_deletion_releases_its_nautobot_address(
        tmp_path: Path, nautobot: Nautobot) -> None:
    host = Host(tmp_path / "root")
    host.write_file(TOKEN_FILE, nautobot.token)
    settings = {"nautobot": {"url": nautobot.url, "tokenFile": TOKEN_FILE, "timeout": "30s",
                             "pools": {"v4": {"prefix": "192.0.2.0/24"}}}}
    doc = {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
           "spec": {"ipam": {"plugins": settings},
                    "lifecycle": {"onDelete": {"kubeadmReset": False,
                                               "removeCniConfig": False}}}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    config = load_config(host, default_sources([str(path)])).config
    journal = Journal.load(host)
    request = ClaimRequest("uid-1/eth0/ipv4", "v4", "ipv4", "eth0", hostname="worker-0")
    allocation = open_plugin("nautobot", settings, PluginEnv(host)).claim(request)
    record(journal, "nautobot", request, allocation)
    assert claims(nautobot) == [str(allocation.interface)]

    published: list[bool] = []
    policy = DeletePolicy(host, config, journal, Conditions(host, []), published.append,
                          "uid-1", PluginEnv(host), Results())
    assert policy.run() is None
    released = policy.conditions.get("AddressesReleased")
    assert (released.status, released.reason) == ("True", "AddressesReleased")
    assert released.message == f"released {allocation.interface} of eth0 (nautobot pool 'v4')"
    assert claims(nautobot) == []
    assert held(Journal.load(host)) == []
