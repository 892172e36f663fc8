"""The node's `systemctl restart kubelet` after its flags changed, as the kubelet takes it:
it reads /var/lib/kubelet/kubeadm-flags.env at start and exits at once on a flag it does
not know or a value it cannot parse (`failed to parse kubelet flag: unknown flag: --x`,
cmd/kubelet/app/server.go), else serves its healthz endpoint (127.0.0.1:10248, `ok`).

The sandbox has no systemd and no kubelet: `restart` stops the previous healthz server
(its pidfile under the node's root, which the sandbox's undo also stops), checks that
the node's kubelet program runs (an in-place release change replaces it) and the flags
as the kubelet's parser would for the flags it knows here (a subset: those a kubeadm
user sets), and starts a new server in the caller's network namespace (the
node's) when they pass. Like systemctl, it exits 0 either way: a kubelet that dies on its
flags is seen by asking its health, not by the restart.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from machine_agent_sandbox.kubeadm import kubelet
from machine_agent_sandbox.kubeadm.flags import FLAGS
from machine_agent_sandbox.kubeadm.node import KUBELET_PROGRAM

PIDFILE = "run/machine-agent-sandbox/kubelet-healthz.pid"
LOG = "var/log/kubelet.log"
HEALTHZ_PORT = 10248
KNOWN = frozenset({"address", "anonymous-auth", "authentication-token-webhook",
    "authorization-mode", "bootstrap-kubeconfig", "cgroup-driver", "client-ca-file",
    "cloud-provider", "cluster-dns", "cluster-domain", "config",
    "container-log-max-files", "container-log-max-size", "container-runtime-endpoint",
    "cpu-manager-policy", "enforce-node-allocatable", "eviction-hard", "eviction-soft",
    "eviction-soft-grace-period", "fail-swap-on", "feature-gates", "hostname-override",
    "image-gc-high-threshold", "image-gc-low-threshold", "image-service-endpoint",
    "kube-reserved", "kubeconfig", "max-pods", "node-ip", "node-labels",
    "pod-infra-container-image", "pod-max-pids", "protect-kernel-defaults",
    "provider-id", "read-only-port", "register-node", "register-with-taints", "root-dir",
    "rotate-certificates", "runtime-request-timeout", "serialize-image-pulls",
    "system-reserved", "tls-cert-file", "tls-private-key-file",
    "topology-manager-policy", "v", "volume-plugin-dir"})
INTEGER = frozenset({"max-pods", "pod-max-pids", "read-only-port", "v",
                     "image-gc-high-threshold", "image-gc-low-threshold"})


def flag_problem(text: str) -> str | None:
    """What makes the kubelet exit at start with these flags; None when it starts."""
    for name, value in re.findall(r"--([^=\s\"]+)=([^\s\"]*)", text):
        if name not in KNOWN:
            return f"failed to parse kubelet flag: unknown flag: --{name}"
        if name in INTEGER and not re.fullmatch(r"-?\d+", value):
            return (f"failed to parse kubelet flag: invalid argument {value!r} for "
                    f"\"--{name}\" flag: strconv.ParseInt: parsing {value!r}: invalid syntax")
    return None


def program_problem(root: Path) -> str | None:
    """Why the node's kubelet program does not run (None: it does, or the node has none:
    a test node without one)."""
    program = root / KUBELET_PROGRAM
    if not program.exists():
        return None
    done = subprocess.run([str(program), "--version"], capture_output=True, text=True,
                          timeout=30, check=False)
    return None if done.returncode == 0 else (done.stderr or done.stdout).strip()[:300]


def restart(root: Path) -> int:
    pidfile = root / PIDFILE
    try:
        pid = int(pidfile.read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.02)  # its port is free once it is gone
    except (OSError, ValueError):
        pass  # not running
    pidfile.unlink(missing_ok=True)
    kubelet.stop(root)
    log = root / LOG
    log.parent.mkdir(parents=True, exist_ok=True)
    flags = root / FLAGS
    problem = program_problem(root) or (flag_problem(flags.read_text()) if flags.exists()
                                        else None)
    with open(log, "a") as out:
        if problem is not None:
            out.write(f'E run.go:72] "command failed" err="{problem}"\n')
            return 0
        pidfile.parent.mkdir(parents=True, exist_ok=True)
        subprocess.Popen([sys.executable, "-m", "machine_agent_sandbox.kubeadm.kubelet_service",
                          str(root)], stdout=out, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    kubelet.start(root)
    return 0


def serve(root: Path) -> None:
    """The kubelet's healthz, until stopped; its pid in PIDFILE once it listens."""
    class Healthz(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/healthz"
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(b"ok" if ok else b"404 page not found")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", HEALTHZ_PORT), Healthz)
    (root / PIDFILE).write_text(f"{os.getpid()}\n")
    server.serve_forever()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
