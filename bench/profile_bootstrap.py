"""Where one bootstrap's CPU and memory go: the same bootstrap as `bench.bootstrap`
(API stand-in, node RBAC, kubeadm stand-in), run under `-X importtime` (`--runs` times) and
once under tracemalloc. Not a benchmark row: a profile for bench/README.md.

    sudo .venv/bin/python -m bench.profile_bootstrap [--top 25] [--runs 5]

Prints the modules with the largest cumulative and own import times (each module's
best of `--runs` bootstraps), the total import time, the agent's own CPU and peak (VmHWM)
of a plain run, and what tracemalloc traced at the end, by package."""

from __future__ import annotations

import argparse
import compileall
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import agent
from bench.bootstrap import SELF_USAGE, node

TRACED = """
import json, sys, tracemalloc
tracemalloc.start(1)
from agent.cli import main
code = main(sys.argv[1:])
current, peak = tracemalloc.get_traced_memory()
snap = tracemalloc.take_snapshot()
by_file = {}
for stat in snap.statistics("filename"):
    by_file[stat.traceback[0].filename] = stat.size
print(json.dumps({"code": code, "current": current, "peak": peak, "by_file": by_file}),
      file=sys.stderr)
"""


def run(root: Path, path: str, code: str, *flags: str) -> str:
    env = {**os.environ, "PATH": path, "MACHINE_AGENT_COMMANDS_ON_HOST": "1"}
    proc = subprocess.run([sys.executable, *flags, "-c", code, "--log-level", "warning",
                           "--root", str(root), "run"], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    return proc.stderr


def importtime(stderr: str) -> list[tuple[str, int, int]]:
    """(module, own µs, cumulative µs) from `-X importtime`'s lines."""
    out = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, name = (part.strip() for part in line[12:].split("|"))
        out.append((name.strip(), int(own), int(cumulative)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--runs", type=int, default=5,
                        help="bootstraps under -X importtime; each module's best time is "
                             "kept (a shared machine's noise only adds)")
    args = parser.parse_args(argv)
    compileall.compile_dir(Path(agent.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory(prefix="ma-bench-prof-") as tmp:
        with node(Path(tmp), 0) as (root, path, _api):
            plain = json.loads(run(root, path, SELF_USAGE).strip().splitlines()[-1])
        best: dict[str, tuple[int, int]] = {}
        for i in range(args.runs):
            with node(Path(tmp), 10 + i) as (root, path, _api):
                for name, own, cum in importtime(run(root, path, SELF_USAGE, "-X",
                                                     "importtime")):
                    was = best.get(name, (own, cum))
                    best[name] = (min(own, was[0]), min(cum, was[1]))
        imports = [(name, own, cum) for name, (own, cum) in best.items()]
        with node(Path(tmp), 2) as (root, path, _api):
            traced = json.loads(run(root, path, TRACED).strip().splitlines()[-1])
    print(f"plain run: exit {plain['code']}, CPU {plain['cpu'] * 1000:.0f} ms, "
          f"peak (VmHWM) {plain['rss'] / 2**20:.1f} MiB")
    top_level = sum(own for _name, own, _cum in imports)
    print(f"\n-X importtime, best of {args.runs} per module: {len(imports)} modules, "
          f"{top_level / 1000:.0f} ms of imports (sum of own times)")
    print(f"\nlargest cumulative (top {args.top}):")
    for name, own, cum in sorted(imports, key=lambda i: -i[2])[:args.top]:
        print(f"  {cum / 1000:7.1f} ms  (own {own / 1000:5.1f})  {name}")
    print(f"\nlargest own (top {args.top}):")
    for name, own, _cum in sorted(imports, key=lambda i: -i[1])[:args.top]:
        print(f"  {own / 1000:7.1f} ms  {name}")
    by_package: dict[str, int] = {}
    for filename, size in traced["by_file"].items():
        by_package[_package(filename)] = by_package.get(_package(filename), 0) + size
    print(f"\ntracemalloc: {traced['current'] / 2**20:.2f} MiB traced at the end, "
          f"peak {traced['peak'] / 2**20:.2f} MiB (exit {traced['code']})")
    print(f"largest by package (top {args.top}):")
    for name, size in sorted(by_package.items(), key=lambda i: -i[1])[:args.top]:
        print(f"  {size / 1024:8.0f} KiB  {name}")
    return 0


def _package(filename: str) -> str:
    """`agent.config`, `requests`, `<frozen importlib._bootstrap_external>`, `stdlib:ssl`."""
    if filename.startswith("<"):
        return filename
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            rest = parts[parts.index(marker) + 1:]
            return rest[0].removesuffix(".py")
    if "agent" in parts:
        rest = parts[len(parts) - 1 - parts[::-1].index("agent"):]
        return ".".join(rest[:2]).removesuffix(".py")
    return "stdlib:" + Path(filename).stem if "python3" in filename else filename


if __name__ == "__main__":
    sys.exit(main())
