"""Bench only (bench/whole_boot.py), run in the guest by whole-boot-report.service with
the guest's own python3 (standard library only): print this boot's timings on the
serial console, one `WHOLE-BOOT <key> <json>` line each, for the host to compute with.

Times are the guest's: systemd's monotonic stamps (microseconds since the kernel
started), the journal's, and the realtime stamps of the agent's status file, of
cloud-init's log and of the files the join wrote, with the realtime/monotonic pair
read here to put them on one axis."""

import json
import os
import subprocess
import time

UNITS = ("machine-agent.service", "cloud-init-local.service", "cloud-init.service",
         "cloud-config.service", "cloud-final.service", "workload-apiserver.service")
PROPS = ("ActiveState", "Result", "ConditionResult", "InactiveExitTimestampMonotonic",
         "ExecMainStartTimestampMonotonic", "ActiveEnterTimestampMonotonic",
         "ExecMainExitTimestampMonotonic")
FILES = ("/run/node-prep.log", "/run/cluster-api/bootstrap-success.complete",
         "/etc/kubernetes/kubelet.conf")
AGENT = "/opt/machine-agent/bin/machine-agent"


def emit(key, value):
    print("WHOLE-BOOT", key, json.dumps(value, separators=(",", ":")), flush=True)


def run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return proc.stdout


def units():
    out = {}
    for unit in UNITS:
        props = {}
        for line in run(["systemctl", "show", unit, *[f"-p{p}" for p in PROPS]]).splitlines():
            key, _, value = line.partition("=")
            props[key] = int(value) if value.isdigit() else value
        out[unit] = props
    return out


def agent_journal():
    """The agent's own journal entries of this boot: (monotonic µs, PHASE, message)."""
    entries = []
    for line in run(["journalctl", "-b", "-u", "machine-agent", "-o", "json",
                     "--output-fields=MESSAGE,PHASE,_PID"]).splitlines():
        e = json.loads(line)
        if isinstance(e.get("MESSAGE"), str):
            entries.append([int(e["__MONOTONIC_TIMESTAMP"]), e.get("PHASE", ""),
                            e["MESSAGE"][:160], e.get("_PID", "")])
    return entries


def cloud_init_events():
    """`cloud-init analyze dump`: each stage's and module's start and finish."""
    try:
        events = json.loads(run(["cloud-init", "analyze", "dump"]) or "[]")
    except ValueError:
        return []
    return [[e.get("name"), e.get("event_type"), e.get("timestamp"), e.get("result")]
            for e in events]


def main():
    emit("clock", {"realtime": time.clock_gettime(time.CLOCK_REALTIME),
                   "monotonic": time.clock_gettime(time.CLOCK_MONOTONIC)})
    with open("/proc/cmdline") as f:
        emit("cmdline", f.read().strip())
    state = units()
    emit("units", state)
    emit("files", {p: os.stat(p).st_mtime for p in FILES if os.path.exists(p)})
    if state["machine-agent.service"].get("ExecMainStartTimestampMonotonic"):
        emit("analyze", json.loads(run([AGENT, "analyze", "--format", "json"]) or "{}"))
        emit("journal", agent_journal())
    emit("cloudinit", cloud_init_events())
    with open("/var/lib/kubeadm-standin/world.json") as f:
        emit("kubeadm", json.load(f).get("invocations", []))
    emit("end", True)


main()
