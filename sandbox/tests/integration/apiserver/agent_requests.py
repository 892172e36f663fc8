"""The requests the agent itself sends to the management cluster, sent by its own code
(not rebuilt by hand), and written down as a corpus case (agent-corpus/README.md).

`record` drives the agent's client through what a node does with the management cluster:
MachineReader.read, the pre-terminate hook put on (deletion.hold), two status reports
(MachineReporter.publish), the daemon's list and watch of its Machine, the in-cluster IPAM
plugin's claim, lookup and release, and the hook taken off (deletion.let_go); an admin sets
up before and cleans up after, and stands for the IPAM provider. Against a real server its
answers are the corpus (`python -m sandbox.tests.integration.apiserver.agent_requests
URL CA OUT.json`, tokens named as in corpus/README.md); against the stand-in, the test
holds the recorded requests to what the agent sends today.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import requests

from agent.config.identity import IdentitySpec, MachineRef
from agent.daemon.deletion import hold, let_go
from agent.host import Host
from agent.ipam.base import ClaimRequest, PluginEnv
from agent.ipam.capi import CAPIOptions, CAPIPlugin
from agent.kube.claims import claim_key, claim_name
from agent.kube.client import Client
from agent.kube.kubeconfig import Credentials
from agent.kube.machine import MachineReader
from agent.kube.reporter import MachineReporter
from agent.report.conditions import Condition
from agent.state import Journal
from sandbox.tests.integration.apiserver import replay

Obj = dict[str, Any]

NS = "default"
MACHINE, CLUSTER, SECRET, POOL = ("case-r-node", "case-r-cluster", "case-r-node-bootstrap",
                                  "case-r-pool")
USER_AGENT = "corpus-recorder/1.0"
MACHINES = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{NS}/machines"
CLUSTERS = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{NS}/clusters"
SECRETS = f"/api/v1/namespaces/{NS}/secrets"
RBAC = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}"
IPAM = f"/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/{NS}"
WATCH_SECONDS = 3
T0 = dt.datetime(2026, 12, 5, 6, 0, 0, tzinfo=dt.UTC)


class Recorder:
    """Every exchange with one server, as corpus steps; tokens are written by name."""

    def __init__(self, base: str, verify: str | bool, tokens: dict[str, str | None]) -> None:
        self.base, self.verify, self.tokens = base, verify, tokens
        self.names = {token: name for name, token in tokens.items() if token}
        self.steps: list[Obj] = []
        self.label = ""

    def session(self) -> requests.Session:
        recorder = self

        class Recording(requests.Session):
            def request(self, method: str | bytes, url: str | bytes, *args: Any,  # type: ignore[override]
                        **kwargs: Any) -> requests.Response:
                resp = super().request(method, url, *args, **kwargs)
                recorder.write_down(str(method), str(url), kwargs, resp)
                return resp

        session = Recording()
        session.trust_env = False
        return session

    def write_down(self, method: str, url: str, kwargs: Obj, resp: requests.Response) -> None:
        headers = dict(kwargs.get("headers") or {})
        auth = headers.pop("Authorization", None)
        path = url.removeprefix(self.base)
        if kwargs.get("params"):
            path += "?" + urlencode(kwargs["params"])
        request: Obj = {"method": method, "path": path,
                        "token": self.names[auth.removeprefix("Bearer ")] if auth else "none",
                        "headers": headers}
        if kwargs.get("data") is not None:
            request["body"] = json.loads(kwargs["data"])
        step: Obj = {"label": self.label, "request": request}
        answer: Obj = {"status": resp.status_code,
                       "headers": {k.title(): v for k, v in resp.headers.items()
                                   if k.lower() in ("content-type", "warning")}}
        content = resp.content  # a watch: read until the server's timeoutSeconds
        if kwargs.get("stream"):
            events = [json.loads(line) for line in content.splitlines() if line.strip()]
            answer.update(events=events, events_normalized=replay.normalize(events))
            step["watch"] = True
        else:
            try:
                answer["body"] = json.loads(content)
                answer["body_normalized"] = replay.normalize(answer["body"])
            except ValueError:
                answer["body_text"] = content.decode(errors="replace")
        step["response"] = answer
        self.steps.append(step)

    def admin(self, label: str, method: str, path: str, body: Obj | None = None, *,
              content_type: str = "application/json", cleanup: bool = False) -> None:
        self.label = label
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json",
                   "Authorization": f"Bearer {self.tokens['admin']}"}
        if body is not None:
            headers["Content-Type"] = content_type
        self.session().request(method, self.base + path, headers=headers, timeout=10,
                               data=json.dumps(body) if body is not None else None,
                               verify=self.verify)
        if cleanup:
            self.steps[-1]["cleanup"] = True


def _set_up(rec: Recorder) -> None:
    rec.admin("admin creates the node's Role (its Machine, Cluster, Secret; IPAM claims)",
              "POST", f"{RBAC}/roles", {
                  "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                  "metadata": {"name": MACHINE, "namespace": NS},
                  "rules": [
                      {"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines"],
                       "resourceNames": [MACHINE], "verbs": ["get", "list", "watch", "patch"]},
                      {"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines/status"],
                       "resourceNames": [MACHINE], "verbs": ["get", "patch"]},
                      {"apiGroups": ["cluster.x-k8s.io"], "resources": ["clusters"],
                       "resourceNames": [CLUSTER], "verbs": ["get"]},
                      {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [SECRET],
                       "verbs": ["get"]},
                      {"apiGroups": ["ipam.cluster.x-k8s.io"], "resources": ["ipaddressclaims"],
                       "verbs": ["create", "get", "list", "watch", "delete"]},
                      {"apiGroups": ["ipam.cluster.x-k8s.io"], "resources": ["ipaddresses"],
                       "verbs": ["get", "list", "watch"]}]})
    rec.admin("admin binds it to user agent", "POST", f"{RBAC}/rolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": MACHINE, "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": MACHINE},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": "agent"}]})
    rec.admin("admin creates the Cluster", "POST", CLUSTERS, {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": NS},
        "spec": {"controlPlaneEndpoint": {"host": "203.0.113.10", "port": 6443}}})
    data = b"#cloud-config\nruncmd:\n  - echo hello\n"
    rec.admin("admin creates the bootstrap data Secret", "POST", SECRETS, {
        "apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
        "metadata": {"name": SECRET, "namespace": NS,
                     "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
        "data": {"value": base64.b64encode(data).decode(),
                 "format": base64.b64encode(b"cloud-config").decode()}})
    rec.admin("admin creates the Machine", "POST", MACHINES, {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": MACHINE, "namespace": NS,
                     "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
        "spec": {"clusterName": CLUSTER, "version": "v1.31.2",
                 "bootstrap": {"dataSecretName": SECRET},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                       "kind": "DockerMachine", "name": MACHINE}}})


def _at(seconds: int) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _agent(rec: Recorder, state: Path) -> None:
    client = Client(Credentials(rec.base, token=rec.tokens["agent"],
                                ca_file=rec.verify if isinstance(rec.verify, str) else None),
                    session=rec.session())
    host = Host(state)
    rec.label = "agent reads its Machine, its Cluster and its bootstrap data"
    view = MachineReader(client, host, wait=0).read(
        IdentitySpec(machine=MachineRef(name=MACHINE, namespace=NS)))
    rec.label = "agent puts its pre-terminate hook on the Machine"
    hold(client, view, True)
    # Events are left out: see agent-corpus/README.md
    reporter = MachineReporter(client, view, Journal(host), host=host, events=False,
                               interval=0, final_attempts=1)
    rec.label = "agent reports its first conditions (server-side apply, forced)"
    reporter.publish([Condition("NetworkReady", "False", "NetworkConfiguring",
                                "configuring eth0", _at(0))], final=True)
    rec.label = "agent reports progress (one condition changed, one added)"
    reporter.publish([Condition("NetworkReady", "True", "NetworkConfigured",
                                "eth0 203.0.113.21/24", _at(3)),
                      Condition("TimeSynchronized", "False", "TimeSyncing",
                                "waiting for an NTP server", _at(3))], final=True)
    rec.label = "agent lists its Machine by name (the daemon's follower)"
    _, version = client.list(MACHINES, field_selector=f"metadata.name={MACHINE}")
    listed = len(rec.steps) - 1
    rec.label = (f"agent watches its Machine from the list's resourceVersion "
                 f"({WATCH_SECONDS} s, nothing changes)")
    for _ in client.watch_stream(MACHINES, {"resourceVersion": version,
                                            "allowWatchBookmarks": "true",
                                            "fieldSelector": f"metadata.name={MACHINE}"},
                                 WATCH_SECONDS):
        pass
    rec.steps[-1]["request"]["refs"] = [{
        "where": "query:resourceVersion",
        "from": f"steps[{listed}].response.body.metadata.resourceVersion"}]
    _claim(rec, client, host, view.facts)
    rec.label = "agent reads the Machine, then takes its hook off at that resourceVersion"
    let_go(client, view)


def _claim(rec: Recorder, client: Client, host: Host, facts: Any) -> None:
    plugin = CAPIPlugin(CAPIOptions(), PluginEnv(host=host, machine=facts, management=client))
    request = ClaimRequest(claim_key=claim_key(facts.uid, "eth0", "ipv4"), pool=POOL,
                           family="ipv4", interface="eth0")
    name = claim_name(MACHINE, "eth0", "ipv4", request.claim_key)
    ref = {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": POOL}
    rec.label = "agent creates its IPAddressClaim, owned by its Machine"
    plugin._ensure_claim(name, ref, request)
    rec.admin("the provider (admin) creates the IPAddress", "POST", f"{IPAM}/ipaddresses", {
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddress",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"claimRef": {"name": name}, "poolRef": ref, "address": "203.0.113.21",
                 "prefix": 24, "gateway": "203.0.113.1"}})
    rec.admin("the provider (admin) points the claim at it", "PATCH",
              f"{IPAM}/ipaddressclaims/{name}/status", {"status": {"addressRef": {"name": name}}},
              content_type="application/merge-patch+json")
    rec.label = "agent reads its claim and the IPAddress (lookup)"
    allocation = plugin.lookup(request)
    assert allocation is not None, "the claim was answered"
    rec.label = "agent releases its claim: DELETE, then GET until it is gone"
    plugin.release(allocation)
    rec.admin("cleanup", "DELETE", f"{IPAM}/ipaddresses/{name}", cleanup=True)


def _clean_up(rec: Recorder) -> None:
    for path in (f"{MACHINES}/{MACHINE}", f"{CLUSTERS}/{CLUSTER}", f"{SECRETS}/{SECRET}",
                 f"{RBAC}/rolebindings/{MACHINE}", f"{RBAC}/roles/{MACHINE}"):
        rec.admin("cleanup", "DELETE", path, cleanup=True)


def record(base: str, verify: str | bool, tokens: dict[str, str | None],
           state: Path) -> list[Obj]:
    """The steps, recorded against the server at `base` (tokens: admin and agent); the
    agent's own state (its journal) under `state`."""
    rec = Recorder(base, verify, tokens)
    _set_up(rec)
    _agent(rec, state)
    _clean_up(rec)
    return rec.steps


def main() -> None:
    base, ca, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    tokens: dict[str, str | None] = {"admin": "admin-token", "agent": "agent-token"}
    auth = {"Authorization": f"Bearer {tokens['admin']}"}
    version = requests.get(base + "/version", verify=ca, timeout=10, headers=auth).json()
    for path in (f"{MACHINES}/{MACHINE}", f"{CLUSTERS}/{CLUSTER}", f"{SECRETS}/{SECRET}",
                 f"{RBAC}/rolebindings/{MACHINE}", f"{RBAC}/roles/{MACHINE}"):
        requests.delete(base + path, verify=ca, timeout=10, headers=auth)  # an earlier run's
    with tempfile.TemporaryDirectory(prefix="agent-requests-") as state:
        steps = record(base, ca, tokens, Path(state))
    out.write_text(json.dumps({
        "case": out.stem, "title": "The requests the agent itself sends",
        "description": __doc__.split("\n\n")[1].replace("\n", " "),
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "server": version, "base_url": base, "user_agent": USER_AGENT,
        "notes": ["agent-corpus/README.md says which server answered and what it is"],
        "steps": steps}, indent=1) + "\n")
    print(f"{len(steps)} steps -> {out}")


if __name__ == "__main__":
    main()
