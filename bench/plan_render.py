"""Plan and render for a configuration with 100 interfaces (each dual stack, a route and
a VLAN every tenth), against an image root: what `machine-agent plan` costs, config
validation included. The anchor is the same plan for a single interface."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from agent.config import default_sources, load_config
from agent.host import Host
from agent.orchestrator import Orchestrator
from bench.table import Row, sample


def config(interfaces: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for i in range(interfaces):
        items.append({
            "name": f"eth{i}", "mtu": 9000,
            "addresses": [{"static": f"2001:db8:{i:x}::10/64"},
                          {"static": f"2001:db8:{i:x}:1::10/64"}],
            "routes": [{"to": f"2001:db8:ff{i:02x}::/48", "via": f"2001:db8:{i:x}::1"}],
        })
    return {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
            "spec": {"network": {"renderer": "networkd", "interfaces": items,
                                 "hostname": "bench.example.net"}}}


def plan_seconds(root: Path, interfaces: int) -> float:
    host = Host(root)
    host.write_file("/etc/machine-agent/config.yaml", yaml.safe_dump(config(interfaces)))
    start = time.perf_counter()
    loaded = load_config(host, default_sources())
    plans = Orchestrator(loaded, host, phases=None).plan(only=["network"])
    elapsed = time.perf_counter() - start
    assert plans[0].changes, "the plan should write the networkd files"
    return elapsed


def measure(quick: bool) -> list[Row]:
    reps = 5 if quick else 30
    big: list[float] = []
    small: list[float] = []
    with tempfile.TemporaryDirectory(prefix="ma-bench-plan-") as tmp:
        for i in range(reps):
            big.append(plan_seconds(Path(tmp, f"big{i}"), 100))
            small.append(plan_seconds(Path(tmp, f"small{i}"), 1))
    return [Row("plan + render, 100 interfaces", sample(big, "s"), sample(small, "s"),
                "1 interface", "<= 50 ms", max_value=0.05)]
