"""The whole boot in a qemu guest: the golden image of tests/e2e/test_image_boot.py
(the same guest files: a static address, an NTP server inside the guest, CABPK's
bootstrap data joining the workload API stand-in with the kubeadm stand-in, the CNI
plugins, a kubelet stand-in), built once and booted in PAIRS pairs under qemu, the
pair's order alternating (the rows are the medians; one pair varied 0.89-1.11x between
two runs on the same commit):

1. with the agent: from its start (systemd's ExecMainStartTimestampMonotonic) to
   NodeBootstrapped (its READY=1, ActiveEnterTimestampMonotonic), split by the agent's
   own journal lines of that boot (each line opens a segment lasting until the next;
   the segments tile the run) into each external wait and the agent's own time;
2. with the agent switched off (`machine-agent.disabled`) and cloud-init alone running
   the same CABPK data from the NoCloud seed (write_files, bootcmd, runcmd: the
   pre-command, `kubeadm join`, the sentinel), the static address handed to cloud-init
   as a provider would (`network-config=` on the kernel command line: the image turns
   cloud-init's own network configuration off, and the command line comes first,
   cloudinit/stages.py `_find_networking_config`); its end is the CABPK sentinel
   /run/cluster-api/bootstrap-success.complete, its split `cloud-init analyze dump`.

whole-boot-report.service (bench/whole_boot_guest) prints both boots' facts on the
serial console. One boot at a time, software emulation (images/boot.sh's default: KVM
did not boot on this machine): about 2.5 minutes a pair, twice that on a loaded machine;
not run by `--quick`."""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.table import Row, Sample, sample

GUEST = Path(__file__).parent / "whole_boot_guest"
UNITS = ("ntp-test-server.service", "cri-standin.socket", "workload-apiserver.service",
         "kubelet-standin.service", "whole-boot-report.service",
         "whole-boot-poweroff.service")
NETWORK_CONFIG = (b"version: 2\nethernets:\n  eth0:\n    addresses: [192.0.2.10/24]\n"
                  b"    gateway4: 192.0.2.1\n")
"""The agent's spec.network of the guest (tests/e2e/guest/etc/machine-agent/config.yaml)
as cloud-init network configuration."""
CLOUD_INIT_ALONE = ("machine-agent.disabled",
                    "network-config=" + base64.b64encode(NETWORK_CONFIG).decode())
PAIRS = 3
BOOT_TIMEOUT = 900.0
"""Seconds for one boot to power-off: about 3 minutes here, 8 when the machine is loaded."""
SENTINEL = "/run/cluster-api/bootstrap-success.complete"
PRE_COMMAND_DONE = "/run/node-prep.log"
"""Written by the bootstrap data's pre-command (node-prep), the last command before
`kubeadm join` in its runcmd."""
STAGES = ("cloud-init-local.service", "cloud-init.service", "cloud-config.service",
          "cloud-final.service")

OWN = "the agent's own"
START_UP = "the agent's own: start-up (exec to the run's start)"
EXTERNAL: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern)) for name, pattern in (
        ("IPAM claim bound", r"^claiming an "),
        ("address probe (ARP, DAD)", r"^(probing \d+ IPv4|waiting for duplicate address)"),
        ("gateway's answer", r"^checking that gateway "),
        ("management endpoint's answer", r"^checking that the management endpoint "),
        ("service restarts (systemctl)", r"^(restart|reload|start|enable) \S+: systemctl "),
        ("NTP sync", r"^(waiting for the clock to synchronise|ntp: )"),
        ("bootstrap data commands (bootcmd, pre, post)", r"^run sh -c <script"),
        ("join preflight (the site's kubeadm, kubelet --version)",
         r"^kubeadm (join|init) .*\(managed: preflight"),
        ("kubeadm join", r"^(kubeadm (join|init), attempt \d+|kubeadm: )"),
        ("Node registration", r"^(create /run/cluster-api/bootstrap-success\.complete once"
                              r"|waiting for the kubelet to register)"),
        ("CNI proof (ADD/CHECK/DEL) and Node Ready",
         r"^(create /etc/cni/net\.d/|waiting for Node \S+ to be Ready)"),
    ))
"""Which of the agent's journal lines opens an external wait: the phases' progress
reports (as `machine-agent analyze` reads them) and the effects the agent logs before
a command it runs. Any other line opens a segment of the agent's own work."""


def report(console: Sequence[str]) -> dict[str, Any]:
    """The `WHOLE-BOOT <key> <json>` lines whole-boot-report.service printed."""
    found: dict[str, Any] = {}
    for line in console:
        m = re.search(r"WHOLE-BOOT (\w+) (.*)$", line)
        if m:
            found[m.group(1)] = json.loads(m.group(2))
    if not found.get("end"):
        tail = "\n".join(console[-40:])
        raise ValueError(f"no whole-boot report on the console (its tail:\n{tail})")
    return found


def _mono(doc: dict[str, Any], realtime: float) -> float:
    """A guest realtime stamp as seconds since the kernel started."""
    return realtime - (float(doc["clock"]["realtime"]) - float(doc["clock"]["monotonic"]))


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _unit(doc: dict[str, Any], unit: str, prop: str) -> float:
    return int(doc["units"][unit][prop]) / 1e6


@dataclass
class AgentBoot:
    start: float
    """The agent's exec, seconds since the kernel started."""
    bootstrapped: float
    """NodeBootstrapped True: the agent's READY=1."""
    parts: dict[str, float] = field(default_factory=dict)
    """Seconds per external wait, OWN and START_UP; together the whole."""
    phases: dict[str, float] = field(default_factory=dict)
    """`machine-agent analyze`: each phase's span."""
    analyze_seconds: float = 0.0
    analyze_spans_sum: float = 0.0

    @property
    def total(self) -> float:
        return self.bootstrapped - self.start

    @property
    def external(self) -> float:
        return sum(v for k, v in self.parts.items() if k not in (OWN, START_UP))


def agent_boot(doc: dict[str, Any]) -> AgentBoot:
    unit = "machine-agent.service"
    start = _unit(doc, unit, "ExecMainStartTimestampMonotonic")
    end = _unit(doc, unit, "ActiveEnterTimestampMonotonic")
    if not start or not end:
        raise ValueError(f"{unit} did not reach READY=1: {doc['units'][unit]}")
    analysis = doc["analyze"]
    if analysis.get("outcome") != "Bootstrapped":
        raise ValueError(f"the agent's run did not bootstrap: {analysis}")
    run_start = _mono(doc, _stamp(analysis["startedAt"]))
    boot = AgentBoot(start, end, {START_UP: run_start - start, OWN: 0.0})
    boot.parts.update({name: 0.0 for name, _ in EXTERNAL})
    # The agent's own lines (pid 1's "Starting ..." aside) in the run, each the start of
    # a segment lasting until the next line; the run's start and READY=1 close the ends.
    lines = [(us / 1e6, msg) for us, _phase, msg, pid in doc["journal"]
             if pid != "1" and run_start <= us / 1e6 <= end]
    edges = [run_start, *(t for t, _ in lines), end]
    labels = [OWN, *(_label(msg) for _, msg in lines)]
    for label, a, b in zip(labels, edges, edges[1:], strict=False):
        boot.parts[label] += b - a
    for span in analysis["spans"]:
        if span["kind"] == "phase":
            boot.phases[span["name"]] = float(span["seconds"])
    boot.analyze_seconds = float(analysis["seconds"])
    boot.analyze_spans_sum = sum(float(s["seconds"]) for s in analysis["spans"]
                                 if s["kind"] in ("setup", "phase"))
    return boot


def _label(message: str) -> str:
    return next((name for name, pattern in EXTERNAL if pattern.search(message)), OWN)


@dataclass
class CloudInitBoot:
    first_stage: float
    """cloud-init-local's exec, seconds since the kernel started."""
    bootstrapped: float
    """The CABPK sentinel written by the runcmd."""
    stages_run: float
    """Seconds cloud-init's four stages ran, up to the sentinel."""
    pre_commands: float
    """From the runcmd's start (scripts-user) to the pre-command's end."""
    join: float
    """From the pre-command's end to the sentinel: `kubeadm join`."""

    @property
    def total(self) -> float:
        return self.bootstrapped - self.first_stage

    @property
    def own(self) -> float:
        return self.stages_run - self.pre_commands - self.join


def cloud_init_boot(doc: dict[str, Any]) -> CloudInitBoot:
    files = doc["files"]
    if SENTINEL not in files:
        raise ValueError(f"cloud-init did not bootstrap the node: no {SENTINEL} "
                         f"(files: {files})")
    done = _mono(doc, files[SENTINEL])
    scripts = [e for e in doc["cloudinit"] if e[0] == "modules-final/config-scripts-user"
               and e[1] == "start"]
    if not scripts or PRE_COMMAND_DONE not in files:
        raise ValueError("no runcmd in cloud-init's events or no pre-command's output")
    pre_done = _mono(doc, files[PRE_COMMAND_DONE])
    return CloudInitBoot(
        first_stage=_unit(doc, STAGES[0], "ExecMainStartTimestampMonotonic"),
        bootstrapped=done, stages_run=stages_run(doc, until=done),
        pre_commands=pre_done - _mono(doc, scripts[0][2]), join=done - pre_done)


def stages_run(doc: dict[str, Any], until: float = float("inf")) -> float:
    """Seconds cloud-init's stages ran (each from its exec to its exit, or `until`)."""
    total = 0.0
    for unit in STAGES:
        start = _unit(doc, unit, "ExecMainStartTimestampMonotonic")
        stop = _unit(doc, unit, "ExecMainExitTimestampMonotonic") or until
        if start and start < until:
            total += min(stop, until) - start
    return total


def boot_pairs(work: Path, pairs: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Build the image and boot it `pairs` times with the agent and with cloud-init
    alone, the agent first in every other pair: each boot's report, with the host's load
    average at its end (`host_load`: software emulation's times follow the host's load,
    which other work on this machine makes)."""
    from machine_agent_sandbox.testkit.guest_image import boot, build_image

    enable = [arg for unit in UNITS for arg in ("--enable", unit)]
    started = time.monotonic()
    image = build_image(work, ["--overlay", str(GUEST), *enable], BOOT_TIMEOUT)
    print(f"  image built in {time.monotonic() - started:.0f}s", file=sys.stderr)
    docs: dict[str, list[dict[str, Any]]] = {"agent": [], "cloud-init-alone": []}
    kinds = (("agent", ()), ("cloud-init-alone", CLOUD_INIT_ALONE))
    for pair in range(pairs):
        for name, args in kinds if pair % 2 == 0 else kinds[::-1]:
            started = time.monotonic()
            doc = report(boot(work, f"{name}-{pair}.console.log", BOOT_TIMEOUT, args))
            doc["host_load"] = os.getloadavg()[1]  # the last 5 minutes: about one boot
            docs[name].append(doc)
            print(f"  boot {name} ({pair + 1}/{pairs}): {time.monotonic() - started:.0f}s "
                  f"to power-off, host load {doc['host_load']:.1f}", file=sys.stderr)
    (image / "rootfs.raw").unlink()  # 3 GB (sparse) that no one reads again
    return docs["agent"], docs["cloud-init-alone"]


def rows(agent_docs: Sequence[dict[str, Any]], ci_docs: Sequence[dict[str, Any]]
         ) -> list[Row]:
    agents, alones = [agent_boot(d) for d in agent_docs], [cloud_init_boot(d) for d in ci_docs]

    def s(values: Iterable[float]) -> Sample:
        return sample(list(values), "s")

    anchor = "cloud-init alone"
    out = [
        Row("whole boot: kernel to node bootstrapped", s(a.bootstrapped for a in agents),
            s(c.bootstrapped for c in alones), f"{anchor} (CABPK sentinel)", "<= 1.0x",
            max_ratio=1.0),
        Row("agent: its start to NodeBootstrapped", s(a.total for a in agents),
            s(c.total for c in alones), f"{anchor}: first stage to the sentinel",
            "(reference)"),
        Row("agent: its own time (start-up + between waits)",
            s(a.parts[START_UP] + a.parts[OWN] for a in agents), s(c.own for c in alones),
            f"{anchor}: its stages' run time, commands aside", "<= 3 s", max_value=3.0),
        Row(f"  {START_UP}", s(a.parts[START_UP] for a in agents), goal="(reference)"),
        Row("  the agent's own: inside the phases", s(a.parts[OWN] for a in agents),
            goal="(reference)"),
        Row("agent: external waits in all", s(a.external for a in agents),
            goal="(reference)"),
    ]
    anchors = {"kubeadm join": (s(c.join for c in alones), f"{anchor}: kubeadm join"),
               "bootstrap data commands (bootcmd, pre, post)":
                   (s(c.pre_commands for c in alones),
                    f"{anchor}: runcmd to the pre-command's end")}
    for name, _ in EXTERNAL:
        values = s(a.parts[name] for a in agents)
        if name in anchors:
            ref, ref_name = anchors[name]
            out.append(Row(f"  wait: {name}", values, ref, ref_name, "(reference)"))
        elif any(a.parts[name] for a in agents):
            out.append(Row(f"  wait: {name}", values, goal="(reference)"))
        else:
            out.append(Row(f"  wait: {name} (none in this guest)", values,
                           goal="(reference)"))
    out += [Row(f"agent: phase {name} (machine-agent analyze)",
                s(a.phases.get(name, 0.0) for a in agents), goal="(reference)")
            for name in agents[0].phases]
    out.append(Row("cloud-init's stages on the agent's boot (user-data discarded)",
                   s(stages_run(d) for d in agent_docs), s(stages_run(d) for d in ci_docs),
                   f"{anchor}: its stages", "(reference)"))
    if all("host_load" in d for d in (*agent_docs, *ci_docs)):
        out.append(Row("host load during the boot (5-minute average, 2 cores)",
                       sample([d["host_load"] for d in agent_docs], ""),
                       sample([d["host_load"] for d in ci_docs], ""),
                       f"{anchor}'s boot", "(reference)"))
    return out


def measure(quick: bool) -> list[Row]:
    if quick:
        print("  whole_boot: not in --quick (two qemu boots, about 5 minutes)",
              file=sys.stderr)
        return []
    with tempfile.TemporaryDirectory(prefix="ma-bench-whole-boot-",
                                     dir="/var/tmp") as tmp:
        agent_docs, ci_docs = boot_pairs(Path(tmp), PAIRS)
    return rows(agent_docs, ci_docs)
