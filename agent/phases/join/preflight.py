"""The agent's own preflight before kubeadm: every check runs, all failures are reported
at once, each with its fix (kubeadm stops at the first phase that fails and its messages
name no fix).

Check names follow kubeadm's where one exists (cmd/kubeadm/app/preflight/checks.go:
`Swap`, `Port-10250`, `FileContent--proc-sys-net-ipv4-ip_forward`, ...), so one
`ignorePreflightErrors` list serves both.
"""

from __future__ import annotations

import re
import socket
import stat
from dataclasses import dataclass

from agent.errors import AgentError, PermanentError, Reason
from agent.host import Host
from agent.phases.join.joinconfig import Version

KUBELET_PORT = 10250
# Paths as kubeadm checks them (cmd/kubeadm/app/preflight/checks.go: ipv4Forward,
# ipv6DefaultForwarding, bridgenf).
IPV4_FORWARD = "/proc/sys/net/ipv4/ip_forward"
IPV6_FORWARD = "/proc/sys/net/ipv6/conf/default/forwarding"
BRIDGE_NF = "/proc/sys/net/bridge/bridge-nf-call-iptables"


@dataclass(frozen=True)
class PreflightInputs:
    version: Version
    """The Kubernetes version the node joins (Machine.spec.version)."""
    cri_socket: str
    api_server_endpoint: str | None
    kubeadm: str
    kubelet: str
    dual_stack: bool
    br_netfilter: bool
    ignored: frozenset[str]
    """Lower-case check names that only warn; `all` ignores every check."""
    api_timeout: float
    time_gate: str | None
    """Why the time gate is closed, or None when it is open."""


@dataclass(frozen=True)
class Failure:
    check: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"[{self.check}] {self.problem} (fix: {self.fix})"


class PreflightError(PermanentError):
    reason = Reason.PreflightFailed

    def __init__(self, failures: list[Failure]) -> None:
        self.failures = failures
        lines = "; ".join(str(f) for f in failures)
        super().__init__(f"{len(failures)} preflight check(s) failed: {lines}", hint="")


def run_preflight(host: Host, inputs: PreflightInputs) -> list[Failure]:
    """Run every check; raise PreflightError listing all that fail and are not ignored.
    Returns the ignored failures (warnings)."""
    failures = [
        *_runtime(host, inputs.cri_socket),
        *_binaries(host, inputs),
        *_swap(host),
        *_sysctl(host, IPV4_FORWARD, "net.ipv4.ip_forward"),
        *(_sysctl(host, IPV6_FORWARD, "net.ipv6.conf.default.forwarding")
          if inputs.dual_stack else []),
        *(_br_netfilter(host) if inputs.br_netfilter else []),
        *_port_free(host, KUBELET_PORT),
        *_api_reachable(inputs.api_server_endpoint, inputs.api_timeout),
        *_time_gate(inputs.time_gate),
    ]
    fatal = [f for f in failures
             if "all" not in inputs.ignored and f.check.lower() not in inputs.ignored]
    if fatal:
        raise PreflightError(fatal)
    return failures


def _runtime(host: Host, cri_socket: str) -> list[Failure]:
    path = cri_socket.removeprefix("unix://")
    fix = f"start the container runtime so that it listens on {path}"
    try:
        local = host.path(path)
        if not stat.S_ISSOCK(local.stat().st_mode):
            return [Failure("CRI", f"{path} is not a socket", fix)]
    except (FileNotFoundError, AgentError):
        return [Failure("CRI", f"container runtime socket {path} does not exist", fix)]
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(str(local))
    except OSError as err:
        return [Failure("CRI", f"container runtime socket {path} does not answer: "
                               f"{err.strerror or err}", fix)]
    finally:
        probe.close()
    return []


def _binaries(host: Host, inputs: PreflightInputs) -> list[Failure]:
    # Skew policy (kubernetes.io/releases/version-skew-policy): kubeadm may be the
    # cluster's minor version or one newer; the kubelet must not be newer than the
    # API server and may be up to three minor versions older.
    out: list[Failure] = []
    target = inputs.version
    for name, program, argv, lowest, highest in (
            ("kubeadm", inputs.kubeadm, ["version", "-o", "short"], 0, 1),
            ("kubelet", inputs.kubelet, ["--version"], -3, 0)):
        check = f"FileExisting-{name}"
        found = host.which(program) if "/" not in program else (
            program if host.exists(program) or host.which(program) else None)
        if found is None:
            out.append(Failure(check, f"{program} not found in system path",
                               f"install {name} {target} or set spec.join.{name}Path"))
            continue
        try:
            result = host.run([found, *argv], mutates=False, check=False, timeout=15)
        except AgentError as err:
            out.append(Failure(check, f"{program} does not run: {err.message}",
                               f"reinstall {name}"))
            continue
        m = re.search(r"v?(\d+\.\d+\S*)", result.stdout)
        if not result.ok or m is None:
            out.append(Failure(check, f"`{program} {' '.join(argv)}` gave no version",
                               f"reinstall {name}"))
            continue
        have = Version.parse(m.group(1))
        skew = have.minor - target.minor
        if have.major != target.major or not lowest <= skew <= highest:
            allowed = ("the same minor version or one newer" if name == "kubeadm"
                       else "the same minor version or up to three older")
            out.append(Failure(f"{name.capitalize()}Version",
                               f"{name} v{have} does not fit Kubernetes {target}",
                               f"install a {name} of {allowed} than {target}"))
    return out


def _swap(host: Host) -> list[Failure]:
    text = host.read_text("/proc/swaps")
    if text is None:
        return [Failure("Swap", "cannot read /proc/swaps", "mount /proc")]
    active = [line.split()[0] for line in text.splitlines()[1:] if line.strip()]
    if active:
        return [Failure("Swap", f"swap is on ({', '.join(active)})",
                        "run `swapoff -a` and remove swap from /etc/fstab")]
    return []


def _sysctl(host: Host, path: str, name: str) -> list[Failure]:
    check = "FileContent-" + path.replace("/", "-")
    value = host.read_text(path)
    if value is None:
        return [Failure(check, f"{path} does not exist", f"enable {name} in the kernel")]
    if value.strip() != "1":
        return [Failure(check, f"{path} contents are not set to 1",
                        f"set {name}=1 in /etc/sysctl.d/ and run `sysctl --system`")]
    return []


def _br_netfilter(host: Host) -> list[Failure]:
    check = "FileContent-" + BRIDGE_NF.replace("/", "-")
    value = host.read_text(BRIDGE_NF)
    if value is None:
        return [Failure(check, f"{BRIDGE_NF} does not exist (br_netfilter not loaded)",
                        "load br_netfilter: `modprobe br_netfilter` and add it to "
                        "/etc/modules-load.d/")]
    if value.strip() != "1":
        return [Failure(check, f"{BRIDGE_NF} contents are not set to 1",
                        "set net.bridge.bridge-nf-call-iptables=1 in /etc/sysctl.d/")]
    return []


def _port_free(host: Host, port: int) -> list[Failure]:
    """Read the listening sockets from /proc/net/tcp{,6} (no bind: a check changes nothing)."""
    tables = [host.read_text(p) for p in ("/proc/net/tcp", "/proc/net/tcp6")]
    if all(t is None for t in tables):
        return [Failure(f"Port-{port}", "cannot read /proc/net/tcp", "mount /proc")]
    for table in tables:
        for line in (table or "").splitlines()[1:]:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A" and \
                    int(fields[1].rsplit(":", 1)[1], 16) == port:
                return [Failure(f"Port-{port}", f"Port {port} is in use",
                                f"stop what listens on port {port} (`ss -ltnp`); a "
                                "kubelet from an earlier join needs `kubeadm reset -f`")]
    return []


def _api_reachable(endpoint: str | None, timeout: float) -> list[Failure]:
    if endpoint is None:
        return []
    host, _, port = endpoint.rpartition(":")
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return []
    except OSError as err:
        return [Failure("APIServerReachable",
                        f"cannot connect to the API server {endpoint}: {err.strerror or err}",
                        "check the route, firewall and load balancer to the control plane")]


def _time_gate(why_closed: str | None) -> list[Failure]:
    if why_closed is None:
        return []
    return [Failure("TimeSynchronized", why_closed,
                    "let the time phase complete first (`machine-agent run --only time`)")]
