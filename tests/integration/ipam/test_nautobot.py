"""What the nautobot plugin does that the conformance suite does not show: Nautobot takes
no lock and has no unique custom fields, so the plugin settles a claim key on one address
whoever looks, and reserves the gateway so it is never handed out."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agent.host import Host
from agent.ipam.base import ClaimRequest, PluginEnv, open_plugin
from agent.ipam.nautobot import CLAIM_FIELD
from tests.integration.nautobot.world import Nautobot

TOKEN_FILE = "/etc/machine-agent/nautobot.token"
KEY = "uid-77/eth0/ipv4"


def plugin_env(tmp_path: Path, nautobot: Nautobot) -> PluginEnv:
    host = Host(tmp_path)
    host.write_file(TOKEN_FILE, nautobot.token + "\n", mode=0o600)
    return PluginEnv(host)


def settings(nautobot: Nautobot) -> dict[str, object]:
    return {"nautobot": {"url": nautobot.url, "tokenFile": TOKEN_FILE,
                         "pools": {"v4": {"prefix": "192.0.2.0/24"}}}}


def request(key: str = KEY) -> ClaimRequest:
    return ClaimRequest(claim_key=key, pool="v4", family="ipv4", interface="eth0",
                        machine_namespace="default", machine_name="worker-77")


def test_one_key_claimed_by_six_runs_at_once_ends_on_one_address(
        nautobot: Nautobot, tmp_path: Path) -> None:
    env = plugin_env(tmp_path, nautobot)
    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(
            lambda _: open_plugin("nautobot", settings(nautobot), env).claim(request()),
            range(6)))
    assert len({a.address for a in got}) == 1
    held = [r for r in nautobot.addresses(**{f"cf_{CLAIM_FIELD}": KEY})
            if r["custom_fields"][CLAIM_FIELD] == KEY]
    assert [r["host"] for r in held] == [got[0].address]  # the others were deleted


def test_the_gateway_is_reserved_and_never_handed_out(nautobot: Nautobot,
                                                      tmp_path: Path) -> None:
    plugin = open_plugin("nautobot", settings(nautobot), plugin_env(tmp_path, nautobot))
    first = plugin.claim(request("uid-78/eth0/ipv4"))
    assert first.gateway == "192.0.2.1" and first.address != "192.0.2.1"
    (gateway,) = nautobot.addresses(address="192.0.2.1")
    assert gateway["description"] == "gateway, reserved by machine-agent"
    assert not (gateway.get("custom_fields") or {}).get(CLAIM_FIELD)


def test_release_deletes_the_address_in_nautobot(nautobot: Nautobot, tmp_path: Path) -> None:
    plugin = open_plugin("nautobot", settings(nautobot), plugin_env(tmp_path, nautobot))
    alloc = plugin.claim(request())
    plugin.release(alloc)
    assert nautobot.addresses(**{f"cf_{CLAIM_FIELD}": KEY}) == []
    plugin.release(alloc)  # twice is fine: already gone
