"""Static addresses: each once, and no subnet overlapping another link's. Checked without
comparing every pair of addresses (a node with 10,000 took 12 s to validate), so the
answers are compared here with the pairwise rule on many small random configurations."""

from __future__ import annotations

import ipaddress
import random
from typing import Any

import pytest

from tests.unit.network.netconfig import network_errors

PREFIX = "spec.network."


def pairwise(interfaces: list[dict[str, Any]]) -> list[str]:
    """The rule as a user reads it: each address against every earlier one."""
    seen: dict[str, str] = {}
    earlier: list[tuple[Any, str, str]] = []
    out = []
    for i, iface in enumerate(interfaces):
        for j, spec in enumerate(iface["addresses"]):
            addr = ipaddress.ip_interface(spec["static"])
            path = f"interfaces[{i}].addresses[{j}].static"
            if str(addr.ip) in seen:
                out.append(f"{PREFIX}{path}: {addr.ip} is also {seen[str(addr.ip)]}")
                continue
            seen[str(addr.ip)] = path
            net = addr.network
            for other, name, other_path in earlier:
                if name != iface["name"] and other.version == net.version and \
                        net.overlaps(other):
                    out.append(f"{PREFIX}{path}: {net} overlaps {other} of {name} "
                               f"({other_path})")
                    break
            earlier.append((net, iface["name"], path))
    return out


def random_interfaces(rng: random.Random) -> list[dict[str, Any]]:
    """A few entries with addresses drawn from one small range at several prefix lengths,
    both families, so duplicates, nesting and equal subnets are common."""
    interfaces = []
    for k in range(rng.randint(1, 4)):
        addresses = []
        for _ in range(rng.randint(1, 5)):
            if rng.random() < 0.7:
                ip = f"192.0.2.{rng.choice([1, 2, 5, 9, 17, 33, 65, 129, 200])}"
                length = rng.choice([24, 25, 26, 28, 30, 32])
            else:
                ip = f"2001:db8::{rng.choice([1, 2, 5, 101, 1001])}"
                length = rng.choice([48, 64, 120, 126, 128])
            addresses.append({"static": f"{ip}/{length}"})
        # A name given twice is its own error, but its addresses are still checked.
        name = f"eth{k}" if rng.random() < 0.7 else f"eth{rng.randint(0, 3)}"
        interfaces.append({"name": name, "addresses": addresses})
    return interfaces


def overlap_errors(interfaces: list[dict[str, Any]]) -> list[str]:
    return [e for e in network_errors({"interfaces": interfaces})
            if ".static: " in e and (" overlaps " in e or " is also " in e)]


@pytest.mark.parametrize("seed", range(300))
def test_overlaps_are_the_first_earlier_one_on_another_link(seed: int) -> None:
    interfaces = random_interfaces(random.Random(seed))
    assert [e.split(" (one subnet")[0].split(" (each")[0] for e in overlap_errors(interfaces)] \
        == pairwise(interfaces)


def test_an_overlap_names_the_earliest_subnet_whether_it_holds_or_is_held() -> None:
    errors = overlap_errors([
        {"name": "eth0", "addresses": [{"static": "192.0.2.70/26"}]},
        {"name": "eth1", "addresses": [{"static": "192.0.2.10/24"}]},
        {"name": "eth2", "addresses": [{"static": "192.0.2.1/16"}]},
        {"name": "eth3", "addresses": [{"static": "192.0.2.130/26"}]},
    ])
    assert [e.split(" (one subnet")[0] for e in errors] == [
        f"{PREFIX}interfaces[1].addresses[0].static: 192.0.2.0/24 overlaps 192.0.2.64/26 "
        "of eth0 (interfaces[0].addresses[0].static)",
        f"{PREFIX}interfaces[2].addresses[0].static: 192.0.0.0/16 overlaps 192.0.2.64/26 "
        "of eth0 (interfaces[0].addresses[0].static)",
        f"{PREFIX}interfaces[3].addresses[0].static: 192.0.2.128/26 overlaps 192.0.2.0/24 "
        "of eth1 (interfaces[1].addresses[0].static)",
    ]
