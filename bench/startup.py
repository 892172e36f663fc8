"""Start-up time and memory of `machine-agent --version`, against `cloud-init --version`
(Debian cloud-init) and a bare `python3 -c pass`, measured in the same run.

Each command runs as its own child of a small wrapper that reports the child's wall time
and peak resident memory (getrusage of the waited-for child)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from bench.table import Row, sample

WRAPPER = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
wall = time.perf_counter() - start
print(json.dumps({"wall": wall, "rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, "code": code}))
"""


def run_once(argv: list[str]) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", WRAPPER, *argv], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    doc = json.loads(out)
    if doc["code"] != 0:
        raise SystemExit(f"{argv} exited {doc['code']}")
    return float(doc["wall"]), float(doc["rss"])


def measure(quick: bool) -> list[Row]:
    reps = 3 if quick else 15
    agent = str(Path(sys.executable).with_name("machine-agent"))
    commands = {"agent": [agent, "--version"], "python": [sys.executable, "-c", "pass"]}
    cloud_init = shutil.which("cloud-init")
    if cloud_init:
        commands["cloud-init"] = [cloud_init, "--version"]
    walls: dict[str, list[float]] = {k: [] for k in commands}
    rss: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(reps):  # interleaved, so a noisy moment hits every command alike
        for name, argv in commands.items():
            wall, peak = run_once(argv)
            walls[name].append(wall)
            rss[name].append(peak)
    ours_wall, ours_rss = sample(walls["agent"], "s"), sample(rss["agent"], "B")
    rows = [Row("start-up: machine-agent --version vs bare python", ours_wall,
                sample(walls["python"], "s"), "python3 -c pass", "(reference)")]
    if "cloud-init" in commands:
        ci_wall, ci_rss = sample(walls["cloud-init"], "s"), sample(rss["cloud-init"], "B")
        rows.insert(0, Row("start-up: machine-agent --version", ours_wall, ci_wall,
                           "cloud-init --version", "<= 0.3x cloud-init", max_ratio=0.3))
        rows.append(Row("peak memory: machine-agent --version", ours_rss, ci_rss,
                        "cloud-init --version", "<= 1.0x cloud-init", max_ratio=1.0))
    return rows
