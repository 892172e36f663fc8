"""The netbox plugin against the real NetBox: ten agents at once get no duplicates, the
gateway is never handed out, and the address says whose it is."""

from __future__ import annotations

import ipaddress
import threading
from pathlib import Path

import pytest

from agent.host import Host
from agent.ipam.base import Allocation, ClaimRequest, PluginEnv, PoolNotFound, open_plugin
from tests.integration.ipam.backends import TOKEN_FILE, netbox_settings
from tests.integration.ipam.conftest import NetBox

KEY_FIELD = "machine_agent_claim_key"


def agents(tmp_path: Path, netbox: NetBox, count: int) -> list[PluginEnv]:
    """`count` separate agents: each its own node root, token file and HTTP session."""
    envs = []
    for i in range(count):
        host = Host(tmp_path / f"node-{i}")
        host.write_file(TOKEN_FILE, netbox.token)
        envs.append(PluginEnv(host))
    return envs


def request(key: str, pool: str = "v4", family: str = "ipv4") -> ClaimRequest:
    return ClaimRequest(claim_key=key, pool=pool, family=family,  # type: ignore[arg-type]
                        interface="eth0", machine_namespace="site-a", machine_name="worker-0",
                        hostname="worker-0.example.net")


def claim_at_once(envs: list[PluginEnv], netbox: NetBox,
                  keys: list[str]) -> list[Allocation]:
    """Each agent claims its key; all start together (a barrier), as a fleet booting."""
    plugins = [open_plugin("netbox", {"netbox": netbox_settings(netbox.url)}, env)
               for env in envs]
    start = threading.Barrier(len(plugins))
    results: list[Allocation | BaseException] = [RuntimeError("not run")] * len(plugins)

    def run(i: int) -> None:
        start.wait(timeout=10)
        try:
            results[i] = plugins[i].claim(request(keys[i]))
        except BaseException as err:  # reported below with the agent's number
            results[i] = err

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(plugins))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    failed = [(i, r) for i, r in enumerate(results) if isinstance(r, BaseException)]
    assert not failed, failed
    return [r for r in results if isinstance(r, Allocation)]


def test_ten_agents_with_one_key_get_one_address(tmp_path: Path, netbox: NetBox) -> None:
    allocs = claim_at_once(agents(tmp_path, netbox, 10), netbox, ["uid-1/eth0/ipv4"] * 10)
    assert len({(a.address, a.handle) for a in allocs}) == 1
    stored = [r for r in netbox.addresses(**{f"cf_{KEY_FIELD}": "uid-1/eth0/ipv4"})
              if r["custom_fields"][KEY_FIELD] == "uid-1/eth0/ipv4"]  # type: ignore[index]
    assert len(stored) == 1


def test_ten_agents_with_their_own_keys_get_ten_addresses_never_the_gateway(
        tmp_path: Path, netbox: NetBox) -> None:
    keys = [f"uid-{i}/eth0/ipv4" for i in range(10)]
    allocs = claim_at_once(agents(tmp_path, netbox, 10), netbox, keys)
    addresses = {a.address for a in allocs}
    assert len(addresses) == 10
    assert "192.0.2.1" not in addresses  # the prefix's gateway (custom field)
    assert {a.gateway for a in allocs} == {"192.0.2.1"}
    gateway = [r for r in netbox.addresses(address="192.0.2.1")
               if str(r["address"]).startswith("192.0.2.1/")]
    assert len(gateway) == 1  # reserved once, though ten agents raced to reserve it
    assert gateway[0]["status"]["value"] == "reserved"  # type: ignore[index]


def test_the_address_records_owner_key_and_dns_name(tmp_path: Path, netbox: NetBox) -> None:
    (env,) = agents(tmp_path, netbox, 1)
    plugin = open_plugin("netbox", {"netbox": netbox_settings(netbox.url)}, env)
    alloc = plugin.claim(request("uid-7/eth0/ipv4"))
    (row,) = netbox.addresses(id=alloc.handle)
    assert row["address"] == f"{alloc.address}/24" and alloc.prefix == 24
    assert row["status"]["value"] == "active"  # type: ignore[index]
    assert row["dns_name"] == "worker-0.example.net"
    assert row["description"] == "machine-agent site-a/worker-0 eth0"
    assert row["custom_fields"][KEY_FIELD] == "uid-7/eth0/ipv4"  # type: ignore[index]


def test_a_range_pool_hands_out_range_addresses_with_the_parent_gateway(
        tmp_path: Path, netbox: NetBox) -> None:
    (env,) = agents(tmp_path, netbox, 1)
    plugin = open_plugin("netbox", {"netbox": netbox_settings(netbox.url)}, env)
    alloc = plugin.claim(request("uid-8/eth0/ipv4", pool="range"))
    assert ipaddress.ip_address("203.0.113.10") <= ipaddress.ip_address(alloc.address) \
        <= ipaddress.ip_address("203.0.113.20")
    assert (alloc.prefix, alloc.gateway) == (24, "203.0.113.1")


def test_a_pool_missing_in_netbox_is_pool_not_found(tmp_path: Path, netbox: NetBox) -> None:
    (env,) = agents(tmp_path, netbox, 1)
    plugin = open_plugin("netbox", {"netbox": netbox_settings(netbox.url)}, env)
    with pytest.raises(PoolNotFound) as info:
        plugin.claim(request("uid-9/eth0/ipv4", pool="2001:db8:99::/64", family="ipv6"))
    assert "prefix 2001:db8:99::/64" in info.value.message
