"""`machine-agent demo --fault update-...`: an in-place update that fails on the node, as
an operator meets it. The node bootstraps under the agent's daemon, Cluster API's
UpdateMachine asks the update extension for a change (sandbox/machine_agent_sandbox/
updates.py), the agent tries it, rolls it back, and the reason reaches the Machine and
the hook's answer while the node stays in service."""

from __future__ import annotations

import json
import time

import yaml

from machine_agent_sandbox.kubeadm.node import KUBELET_PROGRAM
from machine_agent_sandbox.sandbox import Sandbox
from machine_agent_sandbox.updates import (
    Update,
    config_object,
    follow_config_object,
    play_update,
    start_daemon,
    start_extension,
    update_request,
    wait_bootstrapped,
)

SHOWN = ("AgentConfigApplied", "TimeSynchronized", "NodeJoined", "NodeBootstrapped")


def say(text: str = "") -> None:
    print(text, flush=True)


def demo_update(box: Sandbox, update: Update, start: float) -> int:
    node = box.nodes[0]
    follow_config_object(box, node)
    say(f"sandbox | Machine {node.name} follows its AgentConfig object configmap/"
        f"{config_object(node)} (annotation machine-agent.io/config)")
    say(f"sandbox | ready in {time.monotonic() - start:.1f}s\n")
    say(f"$ ip netns exec {node.netns} machine-agent --root {node.root} --netns "
        f"{node.netns} daemon   (the systemd service; log: "
        f"{box.registry.base}/{node.name}-daemon.log)")
    start_daemon(box, node)
    wait_bootstrapped(box, node)
    say(f"  NodeBootstrapped True: the node joined and is in service "
        f"({time.monotonic() - start:.1f}s)")
    kept = [node.root / "etc/chrony/chrony.conf", node.root / "var/lib/kubelet/kubeadm-flags.env",
            node.root / KUBELET_PROGRAM]
    before = [path.read_text() for path in kept]
    caller = start_extension(box)
    say("\n$ machine-agent-update-extension --kubeconfig ADMIN --cert ... --port 9443   "
        "(beside the API server)")
    say(f"\nfault   | {update.story}")
    say(f"Cluster API | UpdateMachine {node.name}: " + (
        f"Machine spec.version {update.release}" if update.release else
        f"KubeadmConfig {json.dumps(update.bootstrap_spec())}"))

    last: list[str] = []

    def shown(answer: dict[str, object]) -> None:
        retry = answer.get("retryAfterSeconds")
        line = (f"  answer: {answer.get('status')}"
                + (f", retryAfterSeconds {retry}" if retry else "")
                + f": {answer.get('message', '')}")
        if last and line == last[-1]:
            if len(last) < 2 or last[-2] != line:
                say("  (asked again each second while in progress: the same answer)")
        else:
            say(line)
        last.append(line)

    final = play_update(caller, update_request(box, node, update), shown)
    conditions = box.conditions(node)
    say(f"\n$ kubectl get machine {node.name} -n {box.admin.ns} -o yaml   "
        "(status.conditions, in part)")
    say(yaml.safe_dump([{k: conditions[t].get(k) for k in ("type", "status", "reason",
                                                           "message")}
                        for t in SHOWN if t in conditions],
                       sort_keys=False, width=100, allow_unicode=True).rstrip())
    problems = []
    if final.get("status") != "Failure":
        problems.append(f"UpdateMachine answered {final.get('status')}, not Failure")
    applied = conditions.get("AgentConfigApplied") or {}
    if (applied.get("status"), applied.get("reason")) != ("False", str(update.reason)):
        problems.append(f"AgentConfigApplied is {applied.get('status')} "
                        f"{applied.get('reason')}, not False {update.reason}")
    if (conditions.get("NodeBootstrapped") or {}).get("status") != "True":
        problems.append("the node left service (NodeBootstrapped is not True)")
    problems.extend(f"{path} was not rolled back" for path, text in zip(kept, before,
                                                                        strict=True)
                    if path.read_text() != text)
    say("")
    for problem in problems:
        say(f"UNEXPECTED: {problem}")
    if not problems:
        say(f"as expected: the change was tried and rolled back (chronyd's servers, the "
            f"kubelet's flags and program as before), AgentConfigApplied is False with reason "
            f"{update.reason}, UpdateMachine failed with the agent's reason, and the node "
            "stayed in service")
    say(f"demo took {time.monotonic() - start:.1f}s")
    return 1 if problems else 0
