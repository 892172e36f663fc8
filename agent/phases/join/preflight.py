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

from agent.errors import AgentError, PermanentError, Reason, TemporaryError
from agent.host import Host
from agent.phases.join.joinconfig import Version
from agent.recordtype import record

KUBELET_PORT = 10250
API_CHECK = "APIServerReachable"
# Paths as kubeadm checks them (cmd/kubeadm/app/preflight/checks.go: ipv4Forward,
# ipv6DefaultForwarding, bridgenf).
IPV4_FORWARD = "/proc/sys/net/ipv4/ip_forward"
IPV6_FORWARD = "/proc/sys/net/ipv6/conf/default/forwarding"
BRIDGE_NF = "/proc/sys/net/bridge/bridge-nf-call-iptables"


@record(frozen=True)
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


@record(frozen=True)
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
        later = (f" ({API_CHECK} alone would be retried: a control plane may come up "
                 "late; the other checks need a fix first)"
                 if any(f.check == API_CHECK for f in failures) else "")
        super().__init__(f"{len(failures)} preflight check(s) failed: {lines}{later}",
                         hint="")


class APIServerUnreachableError(TemporaryError):
    """Only the API server was not reachable: retried with backoff (by the orchestrator,
    and by the daemon starting the bootstrap again), since a control-plane endpoint
    often comes up after its workers boot."""

    reason = Reason.APIServerUnreachable

    def __init__(self, failure: Failure) -> None:
        self.failures = [failure]
        super().__init__(f"{failure.problem} (the agent's preflight; kubeadm was not run)",
                         hint=failure.fix)


def preflight_results(host: Host, inputs: PreflightInputs) -> list[tuple[str, list[Failure]]]:
    """Every check by name, with its failures (none: it passed). `doctor` shows them all;
    the join phase acts on the failures. The checks that wait run side by side: the two
    programs asked for their versions (about a second each to start in an emulated
    guest) and the API server's answer."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="preflight") as pool:
        binaries = [(name, pool.submit(_binary, host, inputs, name))
                    for name in ("kubeadm", "kubelet")]
        api = pool.submit(_api_reachable, inputs.api_server_endpoint, inputs.api_timeout)
        results = _local_results(host, inputs)
        results[1:1] = [(f"FileExisting-{name}", found.result()) for name, found in binaries]
        results.append((API_CHECK, api.result()))
    if inputs.time_gate is not None:
        results.append(("TimeSynchronized", _time_gate(inputs.time_gate)))
    return results


def _local_results(host: Host, inputs: PreflightInputs) -> list[tuple[str, list[Failure]]]:
    """The checks that only read the node, in kubeadm's order (the programs' checks go
    after the first, the API server's last)."""
    results = [
        ("CRI", _runtime(host, inputs.cri_socket)),
        ("Swap", _swap(host)),
        (_sysctl_check(IPV4_FORWARD), _sysctl(host, IPV4_FORWARD, "net.ipv4.ip_forward")),
    ]
    if inputs.dual_stack:
        results.append((_sysctl_check(IPV6_FORWARD),
                        _sysctl(host, IPV6_FORWARD, "net.ipv6.conf.default.forwarding")))
    if inputs.br_netfilter:
        results.append((_sysctl_check(BRIDGE_NF), _br_netfilter(host)))
    results.append((f"Port-{KUBELET_PORT}", _port_free(host, KUBELET_PORT)))
    return results


def is_ignored(failure: Failure, ignored: frozenset[str]) -> bool:
    return "all" in ignored or failure.check.lower() in ignored


def run_preflight(host: Host, inputs: PreflightInputs) -> list[Failure]:
    """Run every check; raise PreflightError listing all that fail and are not ignored,
    or APIServerUnreachableError (temporary) when the API server check is the only one.
    Returns the ignored failures (warnings)."""
    failures = [f for _, found in preflight_results(host, inputs) for f in found]
    fatal = [f for f in failures if not is_ignored(f, inputs.ignored)]
    if [f.check for f in fatal] == [API_CHECK]:
        raise APIServerUnreachableError(fatal[0])
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


def _binary(host: Host, inputs: PreflightInputs, name: str) -> list[Failure]:
    # Skew policy (kubernetes.io/releases/version-skew-policy): kubeadm may be the
    # cluster's minor version or one newer; the kubelet must not be newer than the
    # API server and may be up to three minor versions older.
    target = inputs.version
    program, argv, lowest, highest = (
        (inputs.kubeadm, ["version", "-o", "short"], 0, 1) if name == "kubeadm"
        else (inputs.kubelet, ["--version"], -3, 0))
    check = f"FileExisting-{name}"
    found = host.which(program) if "/" not in program else (
        program if host.exists(program) or host.which(program) else None)
    if found is None:
        return [Failure(check, f"{program} not found in system path",
                        f"install {name} {target} or set spec.join.{name}Path")]
    try:
        result = host.run([found, *argv], mutates=False, check=False, timeout=15)
    except AgentError as err:
        return [Failure(check, f"{program} does not run: {err.message}", f"reinstall {name}")]
    m = re.search(r"v?(\d+\.\d+\S*)", result.stdout)
    if not result.ok or m is None:
        return [Failure(check, f"`{program} {' '.join(argv)}` gave no version",
                        f"reinstall {name}")]
    have = Version.parse(m.group(1))
    skew = have.minor - target.minor
    if have.major != target.major or not lowest <= skew <= highest:
        allowed = ("the same minor version or one newer" if name == "kubeadm"
                   else "the same minor version or up to three older")
        return [Failure(f"{name.capitalize()}Version",
                        f"{name} v{have} does not fit Kubernetes {target}",
                        f"install a {name} of {allowed} than {target}")]
    return []


def _swap(host: Host) -> list[Failure]:
    text = host.read_text("/proc/swaps")
    if text is None:
        return [Failure("Swap", "cannot read /proc/swaps", "mount /proc")]
    active = [line.split()[0] for line in text.splitlines()[1:] if line.strip()]
    if active:
        return [Failure("Swap", f"swap is on ({', '.join(active)})",
                        "run `swapoff -a` and remove swap from /etc/fstab")]
    return []


def _sysctl_check(path: str) -> str:
    return "FileContent-" + path.replace("/", "-")


def _sysctl(host: Host, path: str, name: str) -> list[Failure]:
    check = _sysctl_check(path)
    value = host.read_text(path)
    if value is None:
        return [Failure(check, f"{path} does not exist", f"enable {name} in the kernel")]
    if value.strip() != "1":
        return [Failure(check, f"{path} contents are not set to 1",
                        f"set {name}=1 in /etc/sysctl.d/ and run `sysctl --system`")]
    return []


def _br_netfilter(host: Host) -> list[Failure]:
    check = _sysctl_check(BRIDGE_NF)
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
        return [Failure(API_CHECK,
                        f"cannot connect to the API server {endpoint}: {err.strerror or err}",
                        "check the route, firewall and load balancer to the control plane")]


def _time_gate(why_closed: str | None) -> list[Failure]:
    if why_closed is None:
        return []
    return [Failure("TimeSynchronized", why_closed,
                    "let the time phase complete first (`machine-agent run --only time`)")]
