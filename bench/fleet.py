"""A fleet of agents reporting to one management API: requests in total, latency, and the
request rate after an outage against the steady rate.

The scenario is a rolling provisioning: N machines boot at uniformly random times over
the run; each runs a bootstrap's reporting (four phases, each "running", three progress
messages, then True; the summary and a final publish) through the real
`agent.kube.reporter.MachineReporter` on the real `agent.kube.client.Client` (its own
transport session, so one keep-alive TLS connection, per agent), and its network phase
claims the node's address through the real `capi` IPAM plugin (`agent.ipam.capi`): an
IPAddressClaim created, then waited on (list, watch) until the stand-in's in-cluster
pool controller binds an IPAddress, which is read — retried as the orchestrator retries
a phase (spec.retry's defaults). A claim that still fails ends that bootstrap as the
agent would: NetworkReady False, the summary False, a final publish. Agents are threads,
a few hundred per worker process (`python -m bench.fleet` reads its share as JSON on
stdin); the API stand-in (`python -m machine_agent_sandbox.apiserver`) is its own process, so
its CPU does not share a GIL with the agents. After a warm-up (one bootstrap's length)
and a steady window, the stand-in drops every API request for the outage (its fault API,
path `^/apis?/`), then serves again; the rate in the window after it is compared with
the steady rate.

Rates and latencies are the agents' own (each request timed in the Session, dropped
ones counted as sent; a watch counts until its answer's headers); the total is the
stand-in's counter.

With MACHINE_AGENT_TEST_KUBECONFIG (an admin kubeconfig, the CRDs installed; see
docs/e2e-against-a-real-cluster.md) the fleet runs against that cluster instead, in a
namespace of its own (deleted afterwards): ServiceAccount tokens from the TokenRequest
API, the in-cluster IPAM provider's claim logic played by machine_agent_sandbox.pools,
the agents reaching the server through the tests' fault proxy (testkit/faultproxy.py),
which drops every API request for the outage and counts what passes. The 429s a real
server's API Priority and Fairness answers are counted among the agents' answers.

Quick mode runs the same scenario 12 times faster (every agent-side time — reporting
interval, retry backoffs, claim time-out, bootstrap pace — and the outage scaled by
1/12) with a tenth of the agents, so the load on the stand-in is the same.
"""

from __future__ import annotations

import json
import os
import random
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.table import Row, sample

if TYPE_CHECKING:
    import requests

NAMESPACE = "fleet"
CLUSTER = "fleet"
GROUP = "fleet:agents"
POOL = "fleet-pool"
POOL_ADDRESSES = "2001:db8:f1ee::10-2001:db8:f1ee::fff"
"""One IPv6 pool for every agent: 4,080 addresses (no IPv4 documentation range has
1,000)."""
PHASES = {"NetworkReady": "NetworkConfigured", "TimeSynchronized": "TimeSynchronized",
          "NodeJoined": "Joined", "CNIReady": "CNIInstalled"}
"""Each phase's condition and its success reason."""
PROGRESS_STEPS = 3
API_PATHS = "^/apis?/"
"""What the outage drops: every API request, not the stand-in's /sandbox hooks."""
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Scenario:
    agents: int
    workers: int
    scale: float
    """Every agent-side time and the windows, as a fraction of the full run's."""
    step: float = 2.5
    """Seconds between one bootstrap's progress messages (each a publish)."""
    warmup: float = 40.0
    """One bootstrap's length: the rate is steady once the first ones finished."""
    steady: float = 60.0
    outage: float = 60.0
    back: float = 60.0
    """The window after the outage whose rate is compared with the steady one."""
    tail: float = 60.0
    """After the window back: time for the nodes whose bootstrap the outage failed to
    finish on their own (the daemon's pause before another run grows to 16 s and more
    after a few failed runs)."""
    claim_timeout: float = 120.0
    """The capi plugin's default wait for the provider's answer."""

    @property
    def total(self) -> float:
        return (self.warmup + self.steady + self.outage + self.back + self.tail) * self.scale

    def window(self, name: str) -> tuple[float, float]:
        """(start, end) of `steady`, `outage` or `back`, in seconds from the start."""
        start = self.warmup
        for part in ("steady", "outage", "back"):
            length = float(getattr(self, part))
            if part == name:
                return start * self.scale, (start + length) * self.scale
            start += length
        raise KeyError(name)


FULL = Scenario(agents=1000, workers=4, scale=1.0)
QUICK = Scenario(agents=100, workers=2, scale=1 / 12)


# -- the stand-in ----------------------------------------------------------------------

@dataclass
class Api:
    url: str
    ca: str
    token: str
    session: requests.Session

    ns: str = NAMESPACE
    agent_group: str = GROUP
    """Who the agents' RoleBinding names."""

    @property
    def agents_url(self) -> str:
        return self.url

    @property
    def agents_ca(self) -> str:
        return self.ca

    def call(self, method: str, path: str, body: Any = None) -> Any:
        r = self.session.request(method, self.url + path, verify=self.ca, timeout=30,
                                 data=json.dumps(body) if body is not None else None,
                                 headers={"Authorization": f"Bearer {self.token}",
                                          "Content-Type": "application/json"})
        if r.status_code >= 300:
            raise SystemExit(f"{method} {path}: {r.status_code} {r.text[:300]}")
        return r.json()

    def token_for(self, name: str) -> str:
        token: str = self.call("POST", "/sandbox/v1/tokens", {
            "user": f"system:serviceaccount:{self.ns}:machine-agent-{name}",
            "groups": [GROUP]})["token"]
        return token

    def outage(self, down: bool) -> None:
        if down:
            self.call("POST", "/sandbox/v1/faults", {"kind": "drop", "path": API_PATHS})
        else:
            self.call("DELETE", "/sandbox/v1/faults")

    def reset_counters(self) -> None:
        self.call("DELETE", "/sandbox/v1/counters")

    def requests_by_verb(self) -> Counter[str]:
        """The server's count of API requests so far, by verb (its own hooks left out)."""
        by_verb: Counter[str] = Counter()
        for c in self.call("GET", "/sandbox/v1/counters")["counters"]:
            if not c["resource"].startswith("/sandbox"):
                by_verb[c["verb"]] += c["count"]
        return by_verb


class ClusterApi(Api):
    """A real cluster (MACHINE_AGENT_TEST_KUBECONFIG): admin calls go to it directly, the
    agents through the fault proxy, which makes the outage and counts the requests."""

    def __init__(self, admin: Any, proxy: Any) -> None:
        import requests

        super().__init__(f"https://{admin.host}:{admin.port}", str(admin.ca or ""), "",
                         requests.Session(), ns=admin.ns,
                         agent_group=f"system:serviceaccounts:{admin.ns}")
        self.on_seeded: Any = None
        self.admin, self.proxy = admin, proxy

    @property
    def agents_url(self) -> str:
        return str(self.proxy.url)

    @property
    def agents_ca(self) -> str:
        return str(self.proxy.ca_path)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return self.admin.call(method, path, body, ok=(200, 201, 202))

    def token_for(self, name: str) -> str:
        sa = f"machine-agent-{name}"
        self.call("POST", f"/api/v1/namespaces/{self.ns}/serviceaccounts", {
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}})
        review = self.call("POST", f"/api/v1/namespaces/{self.ns}/serviceaccounts/{sa}/token",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                            "spec": {"expirationSeconds": 3600}})
        return str(review["status"]["token"])

    def outage(self, down: bool) -> None:
        if down:
            self.proxy.faults.add("drop", path=API_PATHS)
        else:
            self.proxy.faults.clear()

    def reset_counters(self) -> None:
        self._base = Counter({verb: n for (verb, _), n in self.proxy.counters().items()})

    def requests_by_verb(self) -> Counter[str]:
        now: Counter[str] = Counter()
        for (verb, _), n in self.proxy.counters().items():
            now[verb] += n
        return now - getattr(self, "_base", Counter())


@contextmanager
def cluster(kubeconfig: Path, state: Path) -> Iterator[Api]:
    """The cluster of an admin kubeconfig, the fault proxy before it, the pool client for
    the fleet's namespace; the namespace deleted on the way out."""
    import secrets

    from machine_agent_sandbox.external import admin_from_kubeconfig, delete_namespace
    from machine_agent_sandbox.pools import PoolClient
    from machine_agent_sandbox.testkit.faultproxy import FaultProxy

    admin = admin_from_kubeconfig(kubeconfig, state / "material", "fleet-"
                                  + secrets.token_hex(3))
    proxy = FaultProxy(f"https://{admin.host}:{admin.port}",
                       str(admin.ca) if admin.ca else True, state / "proxy", admin.cert)
    with proxy:
        api = ClusterApi(admin, proxy)
        started: list[Any] = []
        # the pool client serves the namespace once seed() has made it
        api.on_seeded = lambda: started.append(PoolClient(admin).start())
        try:
            yield api
        finally:
            for pools in started:
                pools.stop()
            delete_namespace(admin)


@contextmanager
def standin(state: Path) -> Iterator[Api]:
    """The stand-in as its own process, until the block ends."""
    import requests
    import yaml

    proc = subprocess.Popen([sys.executable, "-m", "machine_agent_sandbox.apiserver", "--port", "0",
                             "--state-dir", str(state)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=ROOT)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        url = proc.stdout.readline().strip() if ready else ""
        if not url.startswith("https://"):
            raise SystemExit("the API stand-in did not start within 30 s")
        config = yaml.safe_load((state / "admin.kubeconfig").read_text())
        session = requests.Session()
        session.trust_env = False
        yield Api(url, str(state / "ca.crt"), config["users"][0]["user"]["token"], session)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def seed(api: Api, agents: int) -> list[dict[str, str]]:
    """The namespace, the IPAM pool, one Role for every agent (bound to a group: the
    stand-in's authorizer scans every binding per request, which 1,000 per-node Roles
    would turn into its own cost), and per agent a Machine and a token."""
    ns = api.ns
    capi = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}"
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}"
    api.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": ns}})
    api.call("POST", f"{capi}/clusters", {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": CLUSTER},
        "spec": {"controlPlaneEndpoint": {"host": "203.0.113.10", "port": 6443}}})
    api.call("POST", f"/apis/ipam.cluster.x-k8s.io/v1alpha2/namespaces/{ns}"
                     "/inclusterippools", {
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
        "metadata": {"name": POOL},
        "spec": {"addresses": [POOL_ADDRESSES], "prefix": 64, "gateway": "2001:db8:f1ee::1"}})
    # The reporting and IPAM rules of templates/rbac/node-rbac.yaml, without
    # resourceNames.
    api.call("POST", f"{rbac}/roles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "fleet-agent"},
        "rules": [{"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines/status"],
                   "verbs": ["patch"]},
                  {"apiGroups": ["events.k8s.io"], "resources": ["events"],
                   "verbs": ["create"]},
                  {"apiGroups": ["ipam.cluster.x-k8s.io"], "resources": ["ipaddressclaims"],
                   "verbs": ["create", "get", "list", "watch", "delete"]},
                  {"apiGroups": ["ipam.cluster.x-k8s.io"], "resources": ["ipaddresses"],
                   "verbs": ["get"]}]})
    api.call("POST", f"{rbac}/rolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "fleet-agent"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "fleet-agent"},
        "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                      "name": api.agent_group}]})
    out = []
    for i in range(agents):
        name = f"worker-{i:04d}"
        machine = api.call("POST", f"{capi}/machines", {
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name},
            "spec": {"clusterName": CLUSTER, "version": "v1.31.2",
                     "bootstrap": {"dataSecretName": f"{name}-bootstrap"},
                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                           "kind": "Metal3Machine", "name": name}}})
        out.append({"name": name, "uid": machine["metadata"]["uid"],
                    "token": api.token_for(name)})
    seeded = getattr(api, "on_seeded", None)
    if seeded is not None:  # a real cluster's IPAM provider, for this namespace
        seeded()
    return out


# -- the driver ------------------------------------------------------------------------

def run_fleet(api: Api, agents: list[dict[str, str]], sc: Scenario,
              rng: random.Random) -> tuple[list[list[float]], list[dict[str, Any]], float]:
    """Start the workers, run the outage on schedule; (requests, bootstraps, t0)."""
    start = time.monotonic() + 3.0 + len(agents) / 500  # time for the workers to start
    shares: list[list[dict[str, Any]]] = [[] for _ in range(sc.workers)]
    # Bootstraps start at a steady pace until the window after the outage ends.
    last_boot = sc.window("back")[1] / sc.scale
    for i, agent in enumerate(agents):
        shares[i % sc.workers].append({**agent, "boot": rng.uniform(0, last_boot)})
    procs = []
    for k, share in enumerate(shares):
        spec = {"url": api.agents_url, "ca": api.agents_ca, "namespace": api.ns,
                "start": start, "scenario": asdict(sc),
                "agents": share, "seed": rng.randrange(2**32), "worker": k}
        proc = subprocess.Popen([sys.executable, "-m", "bench.fleet"], cwd=ROOT,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(spec))
        proc.stdin.close()
        procs.append(proc)
    try:
        down, up = (start + t for t in sc.window("outage"))
        time.sleep(max(0.0, down - time.monotonic()))
        api.outage(True)
        time.sleep(max(0.0, up - time.monotonic()))
        api.outage(False)
        reqs: list[list[float]] = []
        boots: list[dict[str, Any]] = []
        for proc in procs:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], sc.total + 120)
            out = proc.stdout.read() if ready else ""
            proc.wait(timeout=30)
            if proc.returncode != 0:
                raise SystemExit(f"a fleet worker failed ({proc.returncode})")
            result = json.loads(out)
            reqs.extend(result["requests"])
            boots.extend(result["bootstraps"])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    return reqs, boots, start


def measure(quick: bool) -> list[Row]:
    sc = QUICK if quick else FULL
    rng = random.Random(13)
    real = os.environ.get("MACHINE_AGENT_TEST_KUBECONFIG", "")
    with tempfile.TemporaryDirectory(prefix="ma-bench-fleet-") as tmp, \
            (cluster(Path(real), Path(tmp)) if real else standin(Path(tmp) / "api")) as api:
        agents = seed(api, sc.agents)
        api.reset_counters()
        reqs, boots, t0 = run_fleet(api, agents, sc, rng)
        served = api.requests_by_verb()
    return rows(sc, reqs, boots, t0, served)


def rows(sc: Scenario, reqs: list[list[float]], boots: list[dict[str, Any]], t0: float,
         served: Counter[str]) -> list[Row]:
    """Requests are [sent, seconds, HTTP status or 0 for no answer, the node's run (1
    the first), method]."""
    def within(name: str) -> list[list[float]]:
        lo, hi = sc.window(name)
        return [r for r in reqs if lo <= r[0] - t0 < hi]

    def rate(name: str) -> float:
        lo, hi = sc.window(name)
        return len(within(name)) / (hi - lo)

    def pct(values: list[float], q: float) -> float:
        values = sorted(values)
        return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0

    steady = [r[1] for r in within("steady") if r[2]]
    back = [r[1] for r in within("back") if r[2]]
    lo, hi = sc.window("back")
    slot = (hi - lo) / 12  # 5 s of the full run's minute
    per_slot = Counter(int((r[0] - t0 - lo) // slot) for r in within("back"))
    peak = max(per_slot.values(), default=0) / slot
    finished = [b for b in boots if b["finished"] is not None]
    undelivered = sum(1 for b in finished if not b["delivered"])
    claims = [c for b in boots for c in b["claims"]]
    lo, hi = sc.window("steady")
    claimed = [c["seconds"] for c in claims if c["ok"] and lo <= c["begun"] - t0 < hi]
    refused = sum(1 for c in claims if not c["ok"])
    claimers = [b for b in boots if b["claims"]]
    again = sum(1 for b in claimers if not b["claims"][0]["ok"])
    lost = [b for b in claimers if not any(c["ok"] for c in b["claims"])]
    outage_end = t0 + sc.window("outage")[1]
    # When the last node whose first claim failed had its address.
    last_claim = max((c["begun"] + c["seconds"] - outage_end for b in claimers
                      if not b["claims"][0]["ok"] for c in b["claims"] if c["ok"]),
                     default=0.0)
    where = ", ".join(f"{n} {at}" for at, n in Counter(b["at"] for b in lost).most_common())
    outage = f"{sc.outage * sc.scale:.3g} s"
    window = f"{sc.back * sc.scale:.3g} s"
    shown = ", ".join(f"{n} {verb}" for verb, n in sorted(served.items()))
    steady_rate = sample([rate("steady")], "req/s")
    throttled = sum(1 for r in reqs if r[2] == 429)
    per_boot = sum(served.values()) / max(1, len(finished))
    return [
        Row(f"fleet: API requests per finished bootstrap (of {len(finished)})",
            sample([per_boot], "req"), goal="(reference)"),
        Row("fleet: answers 429 TooManyRequests (API Priority and Fairness)",
            sample([throttled], "req"), goal="(reference)"),
        Row(f"fleet: {sc.agents} agents, API requests in total ({shown})",
            sample([sum(served.values())], "req"), goal="(reference; agents sent "
            f"{len(reqs)})"),
        Row("fleet: request latency p50, steady", sample([pct(steady, 0.5)], "s"),
            goal="(reference)"),
        Row("fleet: request latency p99, steady", sample([pct(steady, 0.99)], "s"),
            goal="(reference)"),
        Row(f"fleet: request latency p99, first {window} after the outage",
            sample([pct(back, 0.99)], "s"), sample([pct(steady, 0.99)], "s"),
            "steady p99", "(reference)"),
        Row(f"fleet: request rate during a {outage} outage (all dropped)",
            sample([rate("outage")], "req/s"), steady_rate, "steady rate", "(reference)"),
        Row(f"fleet: request rate in the first {window} after the outage",
            sample([rate("back")], "req/s"), steady_rate, "steady rate",
            "<= 1.5x steady", max_ratio=1.5),
        Row(f"fleet: busiest {slot:.3g} s of those", sample([peak], "req/s"), steady_rate,
            "steady rate", "(reference)"),
        Row(f"fleet: bootstraps whose final status was never delivered (of {len(finished)})",
            sample([undelivered], "boots"), goal="0", max_value=0),
        Row("fleet: IPAM claim, create to IPAddress read, p50, steady",
            sample([pct(claimed, 0.5)], "s"), goal="(reference)"),
        Row("fleet: IPAM claim, create to IPAddress read, p99, steady",
            sample([pct(claimed, 0.99)], "s"), goal="(reference)"),
        Row(f"fleet: IPAM claims that failed after the phase's retries (of {len(claims)}; "
            f"{again} nodes' first, each bootstrap tried again by the daemon)",
            sample([refused], "claims"), goal="(reference)"),
        Row("fleet: the last address of a node whose first claim failed, after the outage "
            "ended",
            sample([max(0.0, last_claim)], "s"), goal="(reference)"),
        Row(f"fleet: nodes left without their address at the end (of {len(claimers)})"
            + (f": {where}" if where else ""), sample([len(lost)], "nodes"), goal="0",
            max_value=0),
    ]


# -- a worker: its share of the agents, as threads ----------------------------------------

def worker(spec: dict[str, Any]) -> dict[str, Any]:
    import logging

    from agent.config.fields import Duration
    from agent.config.retry import RetrySpec
    from agent.daemon.service import START_BACKOFF
    from agent.errors import AgentError, Reason
    from agent.host import Clock, Host
    from agent.ipam.base import ClaimRequest, PluginEnv
    from agent.ipam.capi import CAPIOptions, CAPIPlugin
    from agent.kube.client import DEFAULT_BACKOFF, OUTAGE_CAP, Client
    from agent.kube.facts import MachineFacts
    from agent.kube.kubeconfig import Credentials
    from agent.kube.machine import MachineView
    from agent.kube.reporter import DELIVERY_BACKOFF, MachineReporter
    from agent.kube.transport import Response, Session
    from agent.report import SUMMARY, Conditions
    from agent.retry import Backoff, retry
    from agent.state import Journal

    logging.basicConfig(level=logging.CRITICAL)  # 1,000 agents' warnings are noise here
    sc = Scenario(**spec["scenario"])
    namespace: str = spec.get("namespace", NAMESPACE)
    start: float = spec["start"]
    end = start + sc.total
    stop = threading.Event()
    sent: list[list[float]] = []  # list.append is atomic: shared by every agent
    boots: list[dict[str, Any]] = []
    backoff = Backoff(DELIVERY_BACKOFF.base * sc.scale, DELIVERY_BACKOFF.cap * sc.scale,
                      DELIVERY_BACKOFF.attempts)
    # the client's own retries: the reporter sends with one attempt, a claim with these
    client_backoff = Backoff(DEFAULT_BACKOFF.base * sc.scale, DEFAULT_BACKOFF.cap * sc.scale,
                             DEFAULT_BACKOFF.attempts)
    phase_spec = RetrySpec()  # how the orchestrator retries a phase that failed for now
    phase_backoff = Backoff(phase_spec.initial_delay * sc.scale,
                            phase_spec.max_delay * sc.scale, phase_spec.attempts)
    ipam = CAPIOptions(timeout=Duration(sc.claim_timeout * sc.scale))

    class TimedSession(Session):
        run = 1
        """Which of its node's bootstrap runs sends (the daemon's first, or a retry)."""

        def request(self, method: str, url: str, **kwargs: Any) -> Response:
            begun = time.monotonic()
            try:
                response = super().request(method, url, **kwargs)
            except OSError:
                sent.append([begun, time.monotonic() - begun, 0, self.run, str(method)])
                raise
            sent.append([begun, time.monotonic() - begun, response.status_code, self.run,
                         str(method)])
            return response

    class FleetClock(Clock):
        """Real time; a wait ends early when the run is over."""

        def sleep(self, seconds: float) -> None:
            stop.wait(max(0.0, seconds))

    class MemoryJournal(Journal):
        """Saves are the node's local disk, not the management API's load."""

        def save(self) -> None:
            pass

    clock = FleetClock()
    # Writable: the reporter and the capi plugin count each write to the management
    # cluster as a side effect, which a read-only host refuses. Nothing is written under
    # it (the journal is in memory).
    host = Host(tempfile.gettempdir(), clock=clock)

    def bootstrap(agent: dict[str, str], rng: random.Random) -> None:
        """One node: its daemon's bootstrap, tried again after a temporary failure."""
        if stop.wait(max(0.0, start + float(agent["boot"]) * sc.scale - time.monotonic())):
            return
        facts = MachineFacts(namespace, agent["name"], agent["uid"], CLUSTER)
        view = MachineView(facts, "v1beta2", 1, None)
        journal = MemoryJournal(host)  # one journal across the daemon's runs
        conditions = Conditions(host, list(PHASES))
        record: dict[str, Any] = {"name": agent["name"], "finished": None,
                                  "delivered": False, "claims": [], "runs": 0,
                                  "at": "booting"}
        boots.append(record)
        request = ClaimRequest(claim_key=f"{agent['uid']}/eth0/ipv6", pool=POOL,
                               family="ipv6", interface="eth0", machine_namespace=namespace,
                               machine_name=agent["name"])
        reporter: MachineReporter | None = None
        try:
            while not stop.is_set():
                # Each run opens its own session (a client, one connection) and an
                # orchestrator whose reporter replaces the run before's (as
                # Daemon._orchestrator: the old one closed, the journal shared).
                if reporter is not None:
                    reporter.close()
                    reporter.client.session.close()
                session = TimedSession()
                session.run = record["runs"] + 1
                client = Client(Credentials(spec["url"], token=agent["token"],
                                            ca_file=spec["ca"]),
                                timeout=10.0, backoff=client_backoff, session=session,
                                sleep=clock.sleep, outage_cap=OUTAGE_CAP * sc.scale)
                # The daemon's reporter: the final report tried once, then in the
                # background until delivered (Session.orchestrator, background_delivery).
                reporter = MachineReporter(client, view, journal, host=host,
                                           interval=5.0 * sc.scale, backoff=backoff,
                                           final_attempts=1, keep_trying=True)
                plugin = CAPIPlugin(ipam, PluginEnv(host, facts, client))
                record["runs"] += 1
                outcome = run_once(reporter, conditions, plugin, request, record, rng)
                if outcome != "temporary":
                    break
                # Daemon._start_again_later: a jittered pause growing to 5 minutes.
                pause = START_BACKOFF.delay(min(record["runs"], 10)) * sc.scale
                record["at"] = "pausing before another run"
                if stop.wait(pause):
                    break
            if record["finished"] is not None:
                stop.wait()  # the daemon serves on; its reporter keeps trying meanwhile
        finally:
            if reporter is not None:
                reporter.close()
                record["delivered"] = not reporter.pending
                reporter.client.session.close()

    def run_once(reporter: MachineReporter, conditions: Conditions, plugin: CAPIPlugin,
                 request: ClaimRequest, record: dict[str, Any], rng: random.Random) -> str:
        """One bootstrap's reporting and claim: "done", "temporary" (the claim failed
        for a reason that may pass: the daemon tries again) or "stopped"."""
        for phase in PHASES:
            conditions.set(phase, "Unknown", Reason.InProgress, "running")
            reporter.publish(conditions.all(), final=False)
            if phase == "NetworkReady":  # the network phase claims first, as the agent
                record["at"] = f"claiming (run {record['runs']})"
                begun = time.monotonic()
                try:
                    retry(lambda: plugin.claim(request), phase_backoff, sleep=clock.sleep)
                except AgentError as err:
                    record["claims"].append({"begun": begun, "ok": False,
                                             "seconds": time.monotonic() - begun})
                    if stop.is_set():
                        return "stopped"
                    conditions.set(phase, "False", err.reason, str(err))
                    conditions.set(SUMMARY, "False", err.reason, f"{phase}: {err}")
                    reporter.publish(conditions.all(), final=True)
                    return "temporary" if err.temporary else "stopped"
                record["claims"].append({"begun": begun, "ok": True,
                                         "seconds": time.monotonic() - begun})
                record["at"] = "reporting"
            for k in range(PROGRESS_STEPS):
                # A step's length varies as real waits do (NTP, kubeadm).
                if stop.wait(rng.uniform(0.5, 1.5) * sc.step * sc.scale):
                    return "stopped"
                conditions.set(phase, "Unknown", Reason.InProgress,
                               f"waiting ({k + 1}/{PROGRESS_STEPS})")
                reporter.publish(conditions.all(), final=False)
            if stop.wait(rng.uniform(0.5, 1.5) * sc.step * sc.scale):
                return "stopped"
            conditions.set(phase, "True", Reason(PHASES[phase]), "done")
        conditions.set(SUMMARY, "True", Reason.Bootstrapped, "all phases completed")
        reporter.publish(conditions.all(), final=True)
        if not stop.is_set():
            record["finished"] = time.monotonic()
        return "done"

    threads = []
    for i, agent in enumerate(spec["agents"]):
        rng = random.Random(spec["seed"] * 100003 + i)
        t = threading.Thread(target=bootstrap, args=(agent, rng), daemon=True)
        t.start()
        threads.append(t)
    stop.wait(max(0.0, end - time.monotonic()))
    stop.set()
    for t in threads:
        t.join(timeout=max(0.1, end + 15 - time.monotonic()))
    return {"requests": list(sent), "bootstraps": list(boots)}


if __name__ == "__main__":
    json.dump(worker(json.load(sys.stdin)), sys.stdout)
