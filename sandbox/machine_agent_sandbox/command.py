"""`machine-agent demo`, added to the agent's command line by the entry point
`machine_agent.commands` when this distribution is installed. Kept light: the sandbox
itself is imported only when the command runs."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    demo: argparse.ArgumentParser = sub.add_parser(
        "demo", help="show a whole bootstrap in a throwaway local sandbox (root)",
        description="Bring up a throwaway sandbox on this machine (network namespaces, a "
                    "management API stand-in, chronyd with -x, the kubeadm stand-in, the "
                    "real CNI plugins), run the real agent in it as a node would, and show "
                    "the Machine's conditions. Nothing on the host's own network, clock or "
                    "services is touched. Needs root.")
    demo.add_argument("--keep", action="store_true",
                      help="leave the sandbox in place and print how to inspect and remove it")
    demo.add_argument("--fault", metavar="FAULT",
                      help="show a failure as a user meets it (at bootstrap, or an in-place "
                           "update rolled back); `--fault list` lists them")
    demo.add_argument("--kubeconfig", metavar="FILE",
                      help="run the sandbox's node against the management cluster this admin "
                           "kubeconfig names (e.g. kind's) instead of the stand-in; the "
                           "sandbox works in a namespace of its own and deletes it after")
    demo.add_argument("--cleanup", action="store_true",
                      help="remove sandboxes left by `demo --keep` (or by a demo that was "
                           "killed) and exit")
    demo.set_defaults(plugin_run=_run)


def _run(args: argparse.Namespace) -> int:
    from machine_agent_sandbox.demo import run_demo

    return run_demo(keep=args.keep, fault=args.fault, cleanup=args.cleanup,
                    kubeconfig=args.kubeconfig)
