"""Benchmark (not a test): the network phase applying 1,000 addresses over 100 veth links
in a namespace, and 100 over 10 links (a real node's size, where fixed costs show),
against `ip -batch` doing the same in another namespace in the same run, and the time of
an unchanged re-run. Prints its figures. Needs root and iproute2.

    python -m bench.network_apply           # 100 and 10 links x 10 addresses, 7 rounds each
    python -m bench.network_apply --quick   # 10 links x 10 addresses, one round

Both sides add IPv6 addresses without DAD and the agent sends no ARP probes
(conflictDetection off), so the figures compare netlink work, not protocol waits.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

from agent.config import AgentConfig
from agent.config.fields import Decoder
from agent.host import Host
from agent.phases.base import PhaseContext
from agent.phases.network import NetworkPhase
from agent.state import Journal
from bench.table import Row, sample


def ip(*args: str, stdin: str | None = None) -> None:
    subprocess.run(["ip", *args], input=stdin, text=True, check=True, timeout=300)


def make_links(ns: str, links: int) -> None:
    ip("netns", "add", ns)
    batch = "".join(f"link add v{i} type veth peer name p{i}\nlink set p{i} up\n"
                    for i in range(links))
    ip("-n", ns, "-batch", "-", stdin=batch)


def address(link: int, n: int) -> str:
    return f"2001:db8:{link:x}::{n + 1:x}/64"


def agent_config(links: int, per_link: int) -> AgentConfig:
    doc = {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig", "spec": {
        "network": {
            "renderer": "none",
            "conflictDetection": {"arpProbes": 0, "duplicateAddressDetection": False},
            "interfaces": [{"name": f"v{i}", "addresses": [
                {"static": address(i, n)} for n in range(per_link)]} for i in range(links)]}}}
    decoder = Decoder()
    cfg = decoder.decode_object(AgentConfig, doc, "")
    if decoder.errors:
        raise SystemExit("\n".join(map(str, decoder.errors)))
    assert isinstance(cfg, AgentConfig)
    return cfg


def run_agent(root: Path, ns: str, cfg: AgentConfig) -> tuple[float, int]:
    host = Host(root, netns=ns)
    journal = Journal.load(host)
    journal.start("network", "bench")
    log = logging.getLogger("bench")
    ctx = PhaseContext(cfg, host, journal, {}, lambda m: None, log)
    phase = NetworkPhase()
    start = time.perf_counter()
    plan = phase.plan(PhaseContext(cfg, host.read_only_view(), journal, {}, lambda m: None,
                                   log))
    phase.apply(ctx, plan)
    result = phase.verify(ctx, plan)
    return time.perf_counter() - start, result.netlink_changes


def run_ip_batch(ns: str, links: int, per_link: int, tmp: Path) -> float:
    """`ip -batch FILE`'s wall time, waited for by a blocking wait: `Popen.wait(timeout)`
    polls with sleeps doubling up to 50 ms, so an `ip` done in 33 ms was seen done at
    63.5 (its first bench "slow mode"). A timer kills it if it hangs."""
    batch = tmp / "batch"
    batch.write_text("".join(f"link set v{i} up\n" + "".join(
        f"address add {address(i, n)} dev v{i} nodad\n" for n in range(per_link))
        for i in range(links)))
    start = time.perf_counter()
    proc = subprocess.Popen(["ip", "-n", ns, "-batch", str(batch)])
    guard = threading.Timer(300, proc.kill)
    guard.start()
    try:
        code = proc.wait()
    finally:
        guard.cancel()
    elapsed = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"ip -batch exited {code}")
    return elapsed


def one_round(links: int, per_link: int, cfg: AgentConfig, ip_first: bool
              ) -> tuple[float, int, float, float, int]:
    """(agent first apply, its changes, ip -batch, agent unchanged re-run, its changes),
    each side in fresh namespaces, one right after the other (`ip -batch` first when
    `ip_first`: the rounds alternate, so neither side always follows the other)."""
    tag = uuid.uuid4().hex[:6]
    agent_ns, batch_ns = f"ma-bench-a-{tag}", f"ma-bench-b-{tag}"
    try:
        make_links(agent_ns, links)
        make_links(batch_ns, links)
        with tempfile.TemporaryDirectory(prefix="ma-bench-") as root:
            batch = run_ip_batch(batch_ns, links, per_link, Path(root)) if ip_first else 0.0
            first, changes = run_agent(Path(root), agent_ns, cfg)
            if not ip_first:
                batch = run_ip_batch(batch_ns, links, per_link, Path(root))
            again, unchanged = run_agent(Path(root), agent_ns, cfg)
    finally:
        for ns in (agent_ns, batch_ns):
            subprocess.run(["ip", "netns", "del", ns], check=False, timeout=60)
    return first, changes, batch, again, unchanged


# (links, addresses per link, rounds, goal as a ratio to ip -batch): issue 27's goals
FULL = ((100, 10, 7, 1.2), (10, 10, 7, 1.5))
QUICK = ((10, 10, 1, 1.5),)


def measure(quick: bool) -> list[Row]:
    # repeated: one round on this shared machine varied 1.2-3.3x (bench/README.md)
    return [row for size in (QUICK if quick else FULL) for row in measure_size(*size)]


def measure_size(links: int, per_link: int, reps: int, goal: float) -> list[Row]:
    """Judged by each side's best round: the work is the same every round, and what this
    shared machine adds only slows a round (`ip -batch` alone took either ~32 or ~65 ms
    a round at 100 links on a quiet machine, so a ratio of medians flipped with how many
    rounds were slow); the medians follow, for reference."""
    cfg = agent_config(links, per_link)
    rounds = [one_round(links, per_link, cfg, ip_first=bool(i % 2)) for i in range(reps)]
    firsts, batches, agains = ([r[i] for r in rounds] for i in (0, 2, 3))
    changes, unchanged = max(r[1] for r in rounds), max(r[4] for r in rounds)
    total = links * per_link
    return [
        Row(f"network: {total} addresses on {links} veth ({changes} netlink changes), "
            f"best of {reps}", sample([min(firsts)], "s"), sample([min(batches)], "s"),
            "ip -batch", f"<= {goal}x", max_ratio=goal),
        Row(f"network: {total} addresses on {links} veth, medians", sample(firsts, "s"),
            sample(batches, "s"), "ip -batch", "(reference)"),
        Row(f"network: unchanged re-run, {links} veth ({unchanged} changes)",
            sample(agains, "s"), goal="0 changes, <= 0.1 s",
            max_value=0.1 if unchanged == 0 else -1.0),
    ]


if __name__ == "__main__":
    from bench.table import print_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 links instead of 100")
    print_table(measure(parser.parse_args().quick))
