"""One whole bootstrap against the management API stand-in (the node's shipped RBAC, a
CABPK bootstrap Secret, the kubeadm stand-in on PATH): the agent's own CPU time, its peak
memory, the wall time with every external wait at zero, and the API requests it made by
verb — then an up-to-date second run. The anchor, `cloud-init --version` under GNU time
(its CPU and peak memory), runs before each bootstrap.

The agent runs as a child that executes `machine-agent run` in-process and reports its own
getrusage (RUSAGE_SELF), so the kubeadm it runs is not counted as the agent's CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from machine_agent_sandbox.apiserver import ApiServer
from machine_agent_sandbox.testkit.management import Admin, World, make_node, node_token, seed
from machine_agent_sandbox.testkit.node import joinable

from bench.table import Row, sample

# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across fork and
# exec, so a child of a large process would report the parent's size.
SELF_USAGE = """
import json, re, resource, sys
from agent.cli import main
code = main(sys.argv[1:])
usage = resource.getrusage(resource.RUSAGE_SELF)
hwm = re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)
print(json.dumps({"code": code, "cpu": usage.ru_utime + usage.ru_stime,
                  "rss": int(hwm) * 1024}), file=sys.stderr)
"""


def run_agent(root: Path, path: str) -> tuple[float, float, float]:
    """(cpu seconds, peak bytes, wall seconds) of one `machine-agent run` in a child."""
    # the tree is a stand-in node whose commands run here (agent.commands.COMMANDS_ON_HOST_ENV)
    env = {**os.environ, "PATH": path, "MACHINE_AGENT_COMMANDS_ON_HOST": "1"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", SELF_USAGE, "--log-level", "warning",
                           "--root", str(root), "run"], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    wall = time.perf_counter() - start
    usage = json.loads(proc.stderr.strip().splitlines()[-1])
    if usage["code"] != 0:
        raise SystemExit(f"bootstrap failed ({usage['code']}):\n{proc.stdout}\n{proc.stderr}")
    return float(usage["cpu"]), float(usage["rss"]), wall


def cloud_init_usage() -> tuple[float, float]:
    """(cpu seconds, peak bytes) of one `cloud-init --version`, from GNU time."""
    proc = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "cloud-init", "--version"],
                          capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"cloud-init --version exited {proc.returncode}: {proc.stderr}")
    user, system, kib = proc.stderr.strip().splitlines()[-1].split()
    return float(user) + float(system), float(kib) * 1024


def requests_by_verb(api: ApiServer) -> Counter[str]:
    by_verb: Counter[str] = Counter()
    for (verb, _resource), n in api.counters().items():
        by_verb[verb] += n
    return by_verb


@contextmanager
def node(tmp: Path, index: int) -> Iterator[tuple[Path, str, ApiServer]]:
    """A fresh node tree that bootstraps against a fresh API stand-in (seeded: the
    node's RBAC, its Machine, the bootstrap Secret), the PATH with the kubeadm stand-in,
    and the stand-in."""
    root, tools = tmp / f"n{index}", tmp / f"t{index}"
    root.mkdir()
    tools.mkdir()
    with ApiServer(tmp / f"api{index}") as api, joinable(root, tools) as world:
        admin = Admin(api.url, str(api.ca_path), {"Authorization": f"Bearer {api.admin_token}"},
                      ns="bench")
        admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": "bench"}})
        where = World(root, world.endpoint)
        seed(admin, where)
        made = make_node(where, admin, node_token(admin))
        yield made.root, f"{world.path}:{os.environ['PATH']}", api


def one_bootstrap(tmp: Path, index: int) -> tuple[float, float, float, Counter[str], int]:
    with node(tmp, index) as (root, path, api):
        api.reset_counters()
        cpu, rss, wall = run_agent(root, path)
        first = requests_by_verb(api)
        api.reset_counters()
        run_agent(root, path)
        again = sum(requests_by_verb(api).values())
    return cpu, rss, wall, first, again


def measure(quick: bool) -> list[Row]:
    reps = 1 if quick else 5
    cpus, rsss, walls, totals, agains = [], [], [], [], []
    ci_cpus, ci_rss = [], []
    verbs: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="ma-bench-boot-") as tmp:
        for i in range(reps):
            # Interleaved, so a noisy moment hits both alike.
            ci_cpu, ci_peak = cloud_init_usage()
            ci_cpus.append(ci_cpu)
            ci_rss.append(ci_peak)
            cpu, rss, wall, first, again = one_bootstrap(Path(tmp), i)
            cpus.append(cpu)
            rsss.append(rss)
            walls.append(wall)
            totals.append(sum(first.values()))
            agains.append(again)
            verbs = first
    shown = ", ".join(f"{n} {verb}" for verb, n in sorted(verbs.items()))
    return [
        Row("bootstrap: the agent's own CPU time", sample(cpus, "s"), sample(ci_cpus, "s"),
            "cloud-init --version (CPU)", "<= 0.6x cloud-init", max_ratio=0.6),
        Row("bootstrap: wall time, external waits at zero", sample(walls, "s"),
            goal="(reference)"),
        Row("bootstrap: peak memory", sample(rsss, "B"), sample(ci_rss, "B"),
            "cloud-init --version", "<= 0.6x cloud-init", max_ratio=0.6),
        Row(f"bootstrap: API requests ({shown})", sample(totals, "req"), goal="<= 12",
            max_value=12),
        Row("second run (up to date): API requests", sample(agains, "req"),
            goal="(reference)"),
    ]
