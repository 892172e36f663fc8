"""`machine-agent demo`: a whole bootstrap in a throwaway sandbox on this machine.

The agent runs as a separate process against a temporary node root, twice: the first run
applies, the second proves that a repeated run changes nothing.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

from agent.host import Host


def run_demo(*, keep: bool = False) -> int:
    sandbox = Path(tempfile.mkdtemp(prefix="machine-agent-demo-"))
    node_root = sandbox / "node"
    node = Host(node_root)
    config = resources.files("agent.sandbox").joinpath("node-config.yaml").read_text()
    node.write_file("/etc/machine-agent/config.yaml", config, mode=0o600)
    agent = [sys.executable, "-m", "agent.cli", "--root", str(node_root)]
    tools = Host(sandbox)
    try:
        print(f"sandbox: node root {node_root}")
        for title, argv in (
            ("configuration, with where each value came from", [*agent, "config", "show",
                                                                "--origin"]),
            ("plan (nothing is changed)", [*agent, "plan"]),
            ("first run", [*agent, "run"]),
            ("second run: must change nothing", [*agent, "run"]),
            ("status, as `machine-agent status` shows it", [*agent, "status"]),
        ):
            print(f"\n== {title}")
            result = tools.run(argv, check=False, timeout=120)
            for line in result.stderr.splitlines():
                print(f"  log | {line}")
            print(result.stdout, end="")
            if not result.ok:
                print(f"demo: step failed with exit status {result.returncode}")
                return result.returncode
        print("\nThe phases network, time, join and cni are still empty in this version: "
              "they plan no changes yet.")
        return 0
    finally:
        if keep:
            print(f"\nsandbox kept: inspect {node_root}; remove it with: rm -rf {sandbox}")
        else:
            shutil.rmtree(sandbox, ignore_errors=True)
