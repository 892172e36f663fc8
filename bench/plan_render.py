"""Plan and render for a configuration with 100 interfaces (each two IPv6 addresses and a
route), against an image root: what `machine-agent plan` costs, config validation
included. The anchor is the same plan for a single interface.

Growth: the same for 10, 100 and 1,000 interfaces (one address and a route each), and
for 100, 1,000 and 10,000 addresses (on 10 interfaces). The figure is the marginal cost
of an item between the two largest sizes, (t(1,000) - t(100)) / 900, against the one
between the two smallest, (t(100) - t(10)) / 90: the fixed cost (reading the file, the
image root's checks) drops out, and a cost that grows faster than the items shows."""

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


def config(interfaces: int, addresses: int = 2) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for i in range(interfaces):
        items.append({
            "name": f"eth{i}", "mtu": 9000,
            "addresses": [{"static": f"2001:db8:{i:x}:{j:x}::10/64"}
                          for j in range(addresses)],
            "routes": [{"to": f"2001:db8:f{i:03x}::/48", "via": f"2001:db8:{i:x}::1"}],
        })
    return {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
            "spec": {"network": {"renderer": "networkd", "interfaces": items,
                                 "hostname": "bench.example.net"}}}


def plan_seconds(root: Path, interfaces: int, addresses: int = 2) -> float:
    host = Host(root)
    host.write_file("/etc/machine-agent/config.yaml",
                    yaml.safe_dump(config(interfaces, addresses)))
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
    rows = [Row("plan + render, 100 interfaces", sample(big, "s"), sample(small, "s"),
                "1 interface", "<= 50 ms", max_value=0.05)]
    return rows + growth(quick)


def growth(quick: bool) -> list[Row]:
    """Marginal cost per item at the large sizes against the small ones. Each size's
    time is the best of its repetitions: the work is CPU-bound and deterministic, so the
    fastest run is the one least disturbed by the shared machine (medians of 1,000-item
    runs moved by 2x with the load)."""
    reps = 3 if quick else 5
    interfaces = (10, 30, 100) if quick else (10, 100, 1000)
    addresses = (100, 300, 1000) if quick else (100, 1000, 10000)
    series = {("interface", "interfaces"): [(n, n, 1) for n in interfaces],
              ("address", "addresses"): [(n, 10, n // 10) for n in addresses]}
    rows = []
    with tempfile.TemporaryDirectory(prefix="ma-bench-growth-") as tmp:
        for (one, what), sizes in series.items():
            times: dict[int, list[float]] = {n: [] for n, _, _ in sizes}
            for r in range(reps):  # interleaved, so a noisy moment hits every size
                for n, links, each in sizes:
                    times[n].append(plan_seconds(Path(tmp, f"{what}{n}-{r}"), links, each))
            (a, _, _), (b, _, _), (c, _, _) = sizes
            best = {n: min(values) for n, values in times.items()}
            small = (best[b] - best[a]) / (b - a)
            large = (best[c] - best[b]) / (c - b)
            rows.append(Row(f"plan + render growth: per {one}, {b:,} to {c:,} {what} "
                            f"(best of {reps})", sample([large], "s"), sample([small], "s"),
                            f"{a:,} to {b:,}", "<= 1.2x (linear)", max_ratio=1.2))
    return rows
