"""The daemon at rest: after its bootstrap against the management API stand-in, with its
watches of the Machine and its AgentConfig open, it is left alone for 60 s (quick: 5 s).
Its CPU time and context switches over that time (goal: none; anchor: a `sleep` process
measured over the same seconds), and its resident memory (anchor: the peak of
`cloud-init --version`, bench/startup.py)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine_agent_sandbox.apiserver import ApiServer
from machine_agent_sandbox.testkit.management import Admin, World, make_node, node_token, seed
from machine_agent_sandbox.testkit.node import joinable

from bench.startup import run_once
from bench.table import Row, sample

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def switches(pid: int) -> int:
    """Context switches of every thread: they grow only when the process runs."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split()[1])
    return total


def resident(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
    return float(kib) * 1024


def wait_ready(sock: socket.socket, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SystemExit("the daemon did not send READY=1")
        sock.settimeout(left)
        if "READY=1" in sock.recv(65536).decode().split("\n"):
            return


def wait_watching(api: ApiServer, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not all(api.counters().get(("watch", kind)) for kind in ("machines", "configmaps")):
        if time.monotonic() > deadline:
            raise SystemExit("the daemon did not open its watches")
        time.sleep(0.1)


def idle(tmp: Path, seconds: float) -> dict[str, float]:
    root, tools = tmp / "n", tmp / "t"
    root.mkdir()
    tools.mkdir()
    with ApiServer(tmp / "api") as api, joinable(root, tools) as world:
        admin = Admin(api.url, str(api.ca_path), {"Authorization": f"Bearer {api.admin_token}"},
                      ns="bench")
        admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": "bench"}})
        where = World(root, world.endpoint)
        seed(admin, where)
        node = make_node(where, admin, node_token(admin))
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(str(tmp / "notify"))
        env = {**os.environ, "PATH": f"{world.path}:{os.environ['PATH']}",
               "NOTIFY_SOCKET": str(tmp / "notify"),
               "MACHINE_AGENT_COMMANDS_ON_HOST": "1"}  # a stand-in node (agent.cli)
        daemon = subprocess.Popen([sys.executable, "-m", "agent.cli", "--log-level",
                                   "warning", "--root", str(node.root), "daemon"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sleeper = subprocess.Popen(["sleep", str(int(seconds) + 60)])
        try:
            wait_ready(notify)
            wait_watching(api)
            time.sleep(1.0)  # the echo of its own reports settles
            before = {p.pid: (cpu_seconds(p.pid), switches(p.pid)) for p in (daemon, sleeper)}
            time.sleep(seconds)
            after = {p.pid: (cpu_seconds(p.pid), switches(p.pid)) for p in (daemon, sleeper)}
            rss = resident(daemon.pid)
        finally:
            for proc in (daemon, sleeper):
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=10)
            notify.close()

    def delta(proc: subprocess.Popen[bytes], index: int) -> float:
        return after[proc.pid][index] - before[proc.pid][index]

    return {"cpu": delta(daemon, 0), "switches": delta(daemon, 1),
            "sleep_cpu": delta(sleeper, 0), "sleep_switches": delta(sleeper, 1), "rss": rss}


def measure(quick: bool) -> list[Row]:
    seconds = 5.0 if quick else 60.0
    with tempfile.TemporaryDirectory(prefix="ma-bench-idle-") as tmp:
        got = idle(Path(tmp), seconds)
    span = f"{seconds:g} s"
    rows = [
        Row(f"idle daemon: CPU time over {span}", sample([got["cpu"]], "s"),
            sample([got["sleep_cpu"]], "s"), "sleep", "≈ 0 (< 10 ms)", max_value=0.01),
        Row(f"idle daemon: context switches over {span}",
            sample([got["switches"]], "switches"), sample([got["sleep_switches"]], "switches"),
            "sleep", "0", max_value=0),
    ]
    cloud_init = shutil.which("cloud-init")
    peak = sample([run_once([cloud_init, "--version"])[1]], "B") if cloud_init else None
    rows.append(Row("idle daemon: resident memory", sample([got["rss"]], "B"), peak,
                    "cloud-init --version (peak)" if peak else "", "<= 1.0x cloud-init"
                    if peak else "(reference)", max_ratio=1.0 if peak else None))
    return rows
