"""docs/netplan-parity.md names every v2 key the translation takes, and every key it
names as carried out is taken (a key the code refuses is not listed as carried out)."""

from __future__ import annotations

from pathlib import Path

from agent.config.netconfig_v2 import (
    BOND_PARAMETERS,
    BRIDGE_PARAMETERS,
    COMMON,
    EXTENSION,
    KEYS,
    MATCH_KEYS,
    ROUTE_KEYS,
    translate,
)

DOC = (Path(__file__).parents[3] / "docs" / "netplan-parity.md").read_text()


def test_every_key_the_translation_takes_is_in_the_parity_table() -> None:
    taken = (COMMON - {EXTENSION}) | set(BOND_PARAMETERS) | set(BRIDGE_PARAMETERS) | {
        f"match.{k}" for k in MATCH_KEYS} | set(ROUTE_KEYS) | set().union(*KEYS.values())
    missing = sorted(k for k in taken - {EXTENSION, "match", "parameters"}
                     if f"`{k}`" not in DOC and f"`parameters.{k}`" not in DOC
                     and f"`{k}" not in DOC)
    assert missing == []


def test_keys_the_table_refuses_are_refused() -> None:
    refused = {"routing-policy": [{"from": "192.0.2.0/24", "table": 100}],
               "wakeonlan": True, "dhcp4-overrides": {"use-dns": False},
               "ipv6-mtu": 1400, "macaddress": "02:00:00:00:00:01"}
    for key, value in refused.items():
        done = translate({"version": 2, "ethernets": {"eth0": {key: value}}})
        assert [p for p, _, _ in done.problems] == [f"networkConfig.ethernets.eth0.{key}"]
        assert f"`{key}`" in DOC and "refused" in DOC.split(f"`{key}`", 1)[1].split("\n")[0]
