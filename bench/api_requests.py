"""API requests per bootstrap, counted by the management API stand-in, by verb.

Runs one whole bootstrap (`machine-agent run` with the real phases) against the stand-in
with the shipped RBAC, then a second run (nothing to do), and prints what each cost.
Goal: at most 12 requests per bootstrap.

    .venv/bin/python bench/api_requests.py
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.cli import main
from agent.sandbox.apiserver import ApiServer
from tests.integration.kube.conftest import Admin, make_node, node_token, seed

GOAL = 12


def count(api: ApiServer, root: Path) -> Counter[str]:
    api.reset_counters()
    assert main(["--log-level", "warning", "--root", str(root), "run"]) == 0
    by_verb: Counter[str] = Counter()
    for (verb, resource), n in api.counters().items():
        by_verb[f"{verb} {resource}"] += n
    return by_verb


def report(title: str, by_verb: Counter[str]) -> int:
    total = sum(by_verb.values())
    print(f"{title}: {total} requests")
    for what, n in sorted(by_verb.items()):
        print(f"  {n:3d}  {what}")
    return total


def main_bench() -> int:
    with tempfile.TemporaryDirectory() as tmp, ApiServer(Path(tmp) / "api") as api:
        admin = Admin(api.url, str(api.ca_path), {"Authorization": f"Bearer {api.admin_token}"},
                      ns="bench")
        admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": "bench"}})
        seed(admin)
        node = make_node(Path(tmp), admin, node_token(admin, api))
        first = report("bootstrap (first run)", count(api, node.root))
        again = report("second run (up to date)", count(api, node.root))
    print(f"goal: <= {GOAL} per bootstrap: {'met' if first <= GOAL else 'MISSED'} "
          f"({first}); a second run costs {again}")
    return 0 if first <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main_bench())
