"""Start-up time and memory of `machine-agent --version`, against `cloud-init --version`
(Debian cloud-init) and a bare `python3 -c pass`, measured in the same run.

Each command runs under GNU time, which reports its wall time and peak resident memory.
(GNU time is a small C program: Linux carries a parent's peak RSS into its children, so
a Python parent would inflate every figure to its own size.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from bench.table import Row, sample


def run_once(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak bytes) of one run of `argv`."""
    proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", *argv], capture_output=True,
                          text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} exited {proc.returncode}: {proc.stderr[-500:]}")
    wall, kib = proc.stderr.strip().splitlines()[-1].split()
    return float(wall), float(kib) * 1024


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
