"""Run the benchmarks and print one table. Not tests: nothing here asserts speed.

    python -m bench.run            # full sizes, repeated
    python -m bench.run --quick    # small sizes, few repetitions (what CI runs)
    python -m bench.run --only startup --only plan_render

Each row gives our figure, the anchor measured in the same run, the ratio, and the goal.
This machine is shared and noisy: compare ratios, not absolute times."""

from __future__ import annotations

import argparse
import compileall
import importlib
import sys
import time
from pathlib import Path

import agent
from bench.table import Row, print_table

BENCHMARKS = ("startup", "plan_render", "bootstrap", "network_apply", "fleet",
              "idle_daemon", "unit_security", "whole_boot")
"""whole_boot (two qemu boots, minutes) runs only in the full bench."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    parser.add_argument("--only", action="append", choices=BENCHMARKS, default=[])
    args = parser.parse_args(argv)
    # The agent's children read compiled bytecode, as from an installed package (pip and
    # dpkg compile it at install time). Under PYTHONDONTWRITEBYTECODE (set on the
    # development machine) with no __pycache__ yet, every child compiled the agent's
    # modules from source: ~60 ms of a bootstrap's CPU time, a fifth of it.
    compileall.compile_dir(Path(agent.__file__).parent, quiet=1)
    rows: list[Row] = []
    for name in args.only or BENCHMARKS:
        start = time.perf_counter()
        print(f"running {name} ...", file=sys.stderr, flush=True)
        rows.extend(importlib.import_module(f"bench.{name}").measure(args.quick))
        print(f"  {name} took {time.perf_counter() - start:.1f}s", file=sys.stderr)
    print(f"machine-agent benchmarks ({'quick' if args.quick else 'full'}), "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
