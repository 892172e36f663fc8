"""`machine-agent demo`: a whole bootstrap in a throwaway sandbox on this machine.

The agent runs as a separate process against a temporary node root, twice: the first run
applies, the second proves that a repeated run changes nothing.
"""

from __future__ import annotations

import json
import shutil
import socket
import sys
import tempfile
from importlib import resources
from pathlib import Path

from agent.host import Host
from agent.sandbox.kubeadm_standin import install

# What a healthy node shows in /proc, for the join phase's preflight.
_PROC = {"/proc/swaps": "Filename\tType\tSize\tUsed\tPriority\n",
         "/proc/sys/net/ipv4/ip_forward": "1\n",
         "/proc/sys/net/bridge/bridge-nf-call-iptables": "1\n",
         "/proc/net/tcp": "  sl  local_address rem_address   st\n",
         "/proc/net/tcp6": "  sl  local_address rem_address   st\n"}
_BOOTSTRAP_DATA = """## template: jinja
#cloud-config
write_files:
- path: /run/kubeadm/kubeadm-join-config.yaml
  owner: root:root
  permissions: '0640'
  content: |
    ---
    apiVersion: kubeadm.k8s.io/v1beta4
    discovery:
      bootstrapToken:
        apiServerEndpoint: {endpoint}
        caCertHashes:
        - sha256:{pin}
        token: abcdef.0123456789abcdef
    kind: JoinConfiguration
    nodeRegistration:
      name: '{{{{ ds.meta_data.local_hostname }}}}'
runcmd:
- kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml
  && echo success > /run/cluster-api/bootstrap-success.complete
"""


def _workload_cluster(sandbox: Path, node: Host) -> tuple[list[socket.socket], dict[str, str]]:
    """A container runtime socket and an API endpoint that answer, the kubeadm stand-in
    on PATH, and CABPK-shaped bootstrap data for the node: what join needs."""
    for path, text in _PROC.items():
        node.write_file(path, text)
    node.make_dir("/var/run/containerd")
    runtime = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    runtime.bind(str(node.path("/var/run/containerd/containerd.sock")))
    runtime.listen(8)
    api = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    api.bind(("127.0.0.1", 0))
    api.listen(8)
    endpoint = f"127.0.0.1:{api.getsockname()[1]}"
    pin = "5e" * 32
    world = sandbox / "cluster.json"
    world.write_text(json.dumps({"version": "v1.31.2", "caCertHash": f"sha256:{pin}",
                                 "tokens": {"abcdef": "0123456789abcdef"}}))
    install(sandbox / "bin", node.root, world)
    node.write_file("/etc/machine-agent/bootstrap-data",
                    _BOOTSTRAP_DATA.format(endpoint=endpoint, pin=pin), mode=0o600)
    return [runtime, api], {"PATH": f"{sandbox / 'bin'}:/usr/bin:/bin"}


def run_demo(*, keep: bool = False) -> int:
    sandbox = Path(tempfile.mkdtemp(prefix="machine-agent-demo-"))
    node_root = sandbox / "node"
    node = Host(node_root)
    config = resources.files("agent.sandbox").joinpath("node-config.yaml").read_text()
    node.write_file("/etc/machine-agent/config.yaml", config, mode=0o600)
    agent = [sys.executable, "-m", "agent.cli", "--root", str(node_root)]
    listeners, env = _workload_cluster(sandbox, node)
    tools = Host(sandbox, env=env)
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
        print("\nThe join ran kubeadm's stand-in (kubeadm cannot be installed here); the "
              "phases network, time and cni are still empty in this version.")
        return 0
    finally:
        for listener in listeners:
            listener.close()
        if keep:
            print(f"\nsandbox kept: inspect {node_root}; remove it with: rm -rf {sandbox}")
        else:
            shutil.rmtree(sandbox, ignore_errors=True)
