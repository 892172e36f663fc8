"""`machine-agent demo`: a whole bootstrap in a throwaway sandbox on this machine.

Brings the sandbox up (sandbox/machine_agent_sandbox/sandbox.py), runs the real agent as a separate
process with the node's view, shows its progress as it comes, then the Machine's
conditions as the management cluster holds them. `--fault NAME` arranges a failure
first (sandbox/machine_agent_sandbox/faults.py) and checks that it ends with the right reason and a
clean node. Everything is removed afterwards unless `--keep`.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from agent.phases import registry
from agent.report import NODE_READY, SUMMARY
from machine_agent_sandbox.cleanup import leftovers, others_kept
from machine_agent_sandbox.cluster import NAMESPACE
from machine_agent_sandbox.demo_update import demo_update
from machine_agent_sandbox.faults import CATALOGUE, Fault
from machine_agent_sandbox.netns import DATA_LINK
from machine_agent_sandbox.node import Node
from machine_agent_sandbox.sandbox import Sandbox
from machine_agent_sandbox.updates import UPDATES

PHASE_CONDITIONS = registry.conditions()
"""The conditions the phases set, from the registry."""


def say(text: str = "") -> None:
    print(text, flush=True)


def agent_command() -> str:
    """This machine-agent as a shell runs it again: `machine-agent` when that is the one on
    PATH, else the executable the demo was started as (a venv's bin/machine-agent, the
    venv not activated), or this interpreter with the module (`python -m agent.cli`)."""
    import shlex
    import shutil

    started = os.path.abspath(sys.argv[0])
    if os.path.basename(started) != "machine-agent" or not os.access(started, os.X_OK):
        return f"{shlex.quote(sys.executable)} -m agent.cli"
    on_path = shutil.which("machine-agent")
    if on_path is not None and os.path.samefile(on_path, started):
        return "machine-agent"
    return shlex.quote(started)


def run_demo(*, keep: bool = False, fault: str | None = None, cleanup: bool = False,
             kubeconfig: str | None = None) -> int:
    external = Path(kubeconfig) if kubeconfig else None
    if external is not None and not external.is_file():
        say(f"machine-agent demo: --kubeconfig {kubeconfig}: no such file; give the admin "
            "kubeconfig of the management cluster (e.g. `kind get kubeconfig > FILE`)")
        return 2
    if fault == "list":
        for f in CATALOGUE.values():
            say(f"  {f.name:<16} {f.story}  ->  {f.condition} {f.reason}")
        for u in UPDATES.values():
            say(f"  {u.name:<16} {u.story}  ->  rolled back, AgentConfigApplied {u.reason}, "
                "UpdateMachine Failure")
        return 0
    if fault is not None and fault not in CATALOGUE and fault not in UPDATES:
        say(f"machine-agent demo: unknown fault {fault!r}; choose from: "
            f"{', '.join([*CATALOGUE, *UPDATES])}")
        return 2
    if fault in UPDATES and external is not None:
        say(f"machine-agent demo: --fault {fault} runs the update extension beside the "
            "sandbox's own API server; leave out --kubeconfig")
        return 2
    if os.geteuid() != 0:
        if cleanup:
            say("machine-agent demo --cleanup needs root: it deletes the sandboxes' network "
                "namespaces and ends their processes.\nRun it as root, e.g.:  sudo "
                f"{agent_command()} demo --cleanup")
        else:
            say("machine-agent demo needs root: it creates network namespaces and runs "
                "chronyd and the agent inside them (nothing on this host's own interfaces, "
                "routes or clock is changed).\nRun it as root, e.g.:  sudo "
                f"{agent_command()} demo")
        return 2
    if cleanup:
        found = leftovers(kept_by=sys.prefix)
        for registry in found:
            registry.undo()
            say(f"removed sandbox {registry.base} (namespaces "
                f"{', '.join(registry.record.namespaces) or 'none'})")
        say(f"{len(found)} sandbox(es) removed")
        for other in others_kept(kept_by=sys.prefix):
            say(f"left alone: {other.base}, kept by another installation "
                f"({other.record.made_by}); its own `demo --cleanup` removes it")
        return 0
    driver = os.getpid()

    def interrupted(signum: int, _frame: object) -> None:
        # Helpers forked from this process (pyroute2's namespace sockets are made in a
        # fork) inherit the handler; they must just end, not tear the sandbox down.
        if os.getpid() != driver:
            os._exit(128 + signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)  # even when started with SIGINT ignored
    start = time.monotonic()
    try:
        with Sandbox.up(1, keep=keep, progress=lambda m: say(f"sandbox | {m}"),
                        external=external) as box:
            if fault in UPDATES:
                code = demo_update(box, UPDATES[fault], start)
                _where_to_look(box, box.nodes[0], keep)
                return code
            return _demo(box, CATALOGUE[fault] if fault else None, keep, start)
    except KeyboardInterrupt:
        say("\ninterrupted: the sandbox was removed")
        return 130


def _demo(box: Sandbox, fault: Fault | None, keep: bool, start: float) -> int:
    for note in box.features.notes():
        say(f"sandbox | NOTE: {note}")
    if fault is not None:
        if fault.needs_ipam and not box.features.ipam:
            say(f"fault {fault.name} needs the IPAM plugin that claims from the pool; it "
                "is not installed in this build (see the NOTE above)")
            return 2
        fault.arrange(box)
        say(f"fault   | {fault.story}")
    node = box.nodes[0]
    say(f"sandbox | ready in {time.monotonic() - start:.1f}s\n")
    say(f"$ ip netns exec {node.netns} {agent_command()} --root {node.root} --netns "
        f"{node.netns} run")
    code, _ = node.run("run", on_line=lambda line: say(f"  {line}"))
    say(f"(exit status {code})\n")
    _highlights(node)
    machine = box.admin.machine(node.name)
    say(f"\n$ kubectl get machine {node.name} -n {box.admin.ns} -o yaml   "
        "(spec.readinessGates and status.conditions)")
    shown = {"spec": {"readinessGates": machine["spec"].get("readinessGates", [])},
             "status": {"conditions": machine.get("status", {}).get("conditions", [])}}
    say(yaml.safe_dump(shown, sort_keys=False, width=100, allow_unicode=True).rstrip())
    problems = _check(box, node, fault)
    say("")
    for problem in problems:
        say(f"UNEXPECTED: {problem}")
    if not problems:
        say("as expected: " + (f"{fault.condition} is False with reason {fault.reason}, "
                               "and the node is clean" if fault else
                               f"{SUMMARY} is True: the node bootstrapped"))
    say(f"demo took {time.monotonic() - start:.1f}s")
    _where_to_look(box, node, keep)
    return 1 if problems else 0


def _highlights(node: Node) -> None:
    phases = node.status()["phases"]

    def result(name: str) -> dict[str, Any]:
        found: dict[str, Any] = (phases.get(name) or {}).get("result") or {}
        return found

    addresses = result("network").get("addresses", {})
    if addresses:
        say(f"address   {', '.join(a for group in addresses.values() for a in group)} on "
            f"{', '.join(addresses)}")
    offset = result("time").get("offset")
    if offset is not None:
        say(f"time      offset {float(offset) * 1e6:+.1f} µs against the sandbox's NTP server "
            "(chronyd -x: the host clock is untouched)")
    if node.joined:
        say(f"join      /etc/kubernetes/kubelet.conf written by kubeadm (stand-in) under "
            f"{node.root}")
    registered = result("join").get("nodeRegistered")
    if registered:
        say(f"node      Node {registered} registered by its kubelet on the workload cluster "
            f"({result('join').get('apiServer')}), read with its kubelet.conf")
    cni = result("cni")
    if cni:
        say(f"cni       {cni}")


def _check(box: Sandbox, node: Node, fault: Fault | None) -> list[str]:
    conditions = box.conditions(node)
    problems = []
    if fault is None:
        for kind in (*PHASE_CONDITIONS, NODE_READY, SUMMARY):
            c = conditions.get(kind)
            if c is None or c["status"] != "True":
                problems.append(f"{kind} is {c and c['status']} ({c and c['reason']})")
        return problems
    c = conditions.get(fault.condition) or {}
    if (c.get("status"), c.get("reason")) != ("False", str(fault.reason)):
        problems.append(f"{fault.condition} is {c.get('status')} {c.get('reason')}, not "
                        f"False {fault.reason}")
    if node.joined:
        problems.append("the node has /etc/kubernetes/kubelet.conf")
    addresses = box.network.node_addresses(node.netns)
    if fault.address_kept != bool(addresses):
        problems.append(f"{DATA_LINK} has addresses {addresses or 'none'}")
    return problems


def _where_to_look(box: Sandbox, node: Node, keep: bool) -> None:
    """What to run to look around the kept sandbox (as root, copied as printed)."""
    agent = agent_command()
    if not keep:
        say(f"\n(the sandbox is removed now; `{agent} demo --keep` leaves it up to look "
            "around)")
        return
    base = box.registry.base
    machine_cmd = (
        f"kubectl -n {box.admin.ns} get machine {node.name} -o yaml  (with your kubeconfig; "
        "the namespace goes with the sandbox)" if box.external else
        f"ip netns exec {box.network.router} kubectl --kubeconfig \\\n"
        f"                         {base}/apiserver/admin.kubeconfig -n {NAMESPACE} get "
        f"machine \\\n                         {node.name} -o yaml")
    say(f"""
the sandbox is KEPT. Where to look (as root):
  the agent's view     ip netns exec {node.netns} {agent} --root {node.root} \\
                         --netns {node.netns} status
  the Machine          {machine_cmd}
  the Node             ip netns exec {box.network.router} kubectl --kubeconfig \\
                         {base}/workload-apiserver/admin.kubeconfig get node {node.name} \\
                         -o yaml
  the node's network   ip -n {node.netns} addr; ip -n {node.netns} route
  files it wrote       {node.root}/etc (systemd-networkd, chrony, kubernetes)
  logs                 {base}/*.log, {base}/n0/chrony

Remove it with:
  {agent} demo --cleanup""")
