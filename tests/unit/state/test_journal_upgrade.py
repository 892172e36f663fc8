"""A node upgraded in place reads the journal the previous version wrote: the phases'
results come back typed, every component's section too, and what is written back keeps
the same keys (a node rolled back reads it as well)."""

from __future__ import annotations

import json
from pathlib import Path

from agent.daemon.deletion import DeleteRecord
from agent.host import Host
from agent.ipam.ledger import Ledger, held
from agent.kube.reporter import Reports
from agent.phases import registry
from agent.phases.base import Results
from agent.phases.cni.result import CNIRecord
from agent.phases.join.result import JoinRecord
from agent.state import JOURNAL, Journal

DONE = {"state": "completed", "digest": "sha256:00", "started_at": "2026-12-01T10:00:00Z",
        "finished_at": "2026-12-01T10:01:00Z", "attempts": 1, "steps": [], "intents": {},
        "reason": None, "message": None}
# As the previous version (dict results, the untyped `extra`) wrote it.
PREVIOUS = {"format": 1, "phases": {
    "network": {**DONE, "phase": "network", "result": {
        "live": True, "renderer": "networkd", "addresses": {"eth0": ["192.0.2.10/24"]},
        "claimed": [{"interface": "eth0", "address": "192.0.2.10/24",
                     "gateway": "192.0.2.1", "backend": "netbox", "handle": "ip/7"}],
        "netlinkChanges": 5, "gateways": ["192.0.2.1"], "management": "192.0.2.1:6443",
        "files": ["create /etc/hostname"]}},
    "time": {**DONE, "phase": "time", "result": {
        "synchronised": True, "offset": 0.0004, "stratum": 3, "reference": "192.0.2.123",
        "maxOffset": 0.1, "waited": 2.5,
        "servers": [{"server": "ntp.example.net", "reachable": True, "stratum": 2,
                     "offset": 0.0004, "delay": 0.01},
                    {"server": "ntp2.example.net", "reachable": False, "error": "timeout"}],
        "chronySources": [{"name": "192.0.2.123", "state": "*", "reach": "377"}]}},
    "join": {**DONE, "phase": "join", "result": {
        "node": "worker-0", "apiServer": "https://203.0.113.10:6443",
        "kubernetesVersion": "v1.36.2", "joinConfiguration": "kubeadm.k8s.io/v1beta4",
        "attempts": 2, "nodeRegistered": "worker-0", "failedCommands": []}},
    "cni": {**DONE, "phase": "cni", "result": {
        "binDir": "/opt/cni/bin", "conflist": "/etc/cni/net.d/10-bridge.conflist",
        "network": "pods", "plugins": ["bridge", "host-local"], "conflistDigest": "sha256:1",
        "check": {"commands": ["ADD", "CHECK", "DEL"], "address": "10.22.0.2/24",
                  "namespace": "ma-check-1"},
        "manifest": {"applied": False, "why": "a worker Machine"},
        "node": "worker-0", "nodeReady": True, "nodeReadyReason": "KubeletReady",
        "nodeReadyMessage": "kubelet is posting ready status"}}},
    "extra": {
        "ipam": {"uid-1/eth0/ipv4": {
            "plugin": "netbox", "claim_key": "uid-1/eth0/ipv4", "pool": "rack-1",
            "interface": "eth0", "allocation": {
                "address": "192.0.2.10", "prefix": 24, "family": "ipv4", "gateway": "192.0.2.1",
                "dns_servers": ["192.0.2.53"], "backend": "netbox", "handle": "ip/7"}}},
        "lifecycle": {"machine": "uid-1", "done": ["kubeadmReset"], "finished": False},
        "reports": {"machine": "default/worker-0", "dirty": True, "events": [],
                    "conditions": {"NetworkReady": {"type": "NetworkReady",
                                                    "status": "True"}},
                    "evented": {"NetworkReady": "True:NetworkConfigured"}},
        "join": {"attempts": [{"attempt": 1, "at": "2026-12-01T10:00:30Z",
                               "outcome": "failed", "resetBefore": False,
                               "reason": "TokenExpired", "message": "token expired"},
                              {"attempt": 2, "at": "2026-12-01T10:00:50Z",
                               "outcome": "joined", "resetBefore": True}],
                 "resets": [{"at": "2026-12-01T10:00:40Z", "why": "half-joined",
                             "exitStatus": 0}],
                 "commands": [{"index": 0, "command": "echo hi", "exitStatus": 0,
                               "outputTail": "hi"}]},
        "cni": {"manifestApplied": "sha256:abc"},
        "someone-else": {"kept": True}}}


def write_previous(root: Path) -> Host:
    host = Host(root)
    host.write_file(JOURNAL, json.dumps(PREVIOUS), mode=0o600)
    return host


def test_the_previous_versions_results_are_read_typed(tmp_path: Path) -> None:
    journal = Journal.load(write_previous(tmp_path))
    results = Results({p.name: p.result_from(journal.phases[p.name].result)
                       for p in registry.builtin()})
    network, time, join, cni = (results[n] for n in ("network", "time", "join", "cni"))
    assert results.node_addresses() == {"eth0": ["192.0.2.10/24"]}
    assert results.node_name() == "worker-0"
    assert network.claimed[0].handle == "ip/7" and network.netlink_changes == 5  # type: ignore[attr-defined]
    assert time.servers[1].error == "timeout" and time.max_offset == 0.1  # type: ignore[attr-defined]
    assert join.kubernetes_version == "v1.36.2"  # type: ignore[attr-defined]
    assert cni.check.address == "10.22.0.2/24" and not cni.manifest.applied  # type: ignore[attr-defined]
    for phase in registry.builtin():
        assert phase.message(results[phase.name])  # the condition as it was shown
    assert results["cni"].to_json() == PREVIOUS["phases"]["cni"]["result"]  # type: ignore[index]
    assert results["time"].to_json() == {  # one key more, which the previous version read
        "gated": True, **PREVIOUS["phases"]["time"]["result"]}  # type: ignore[index, dict-item]


def test_the_previous_versions_sections_are_read_typed_and_written_back_alike(
        tmp_path: Path) -> None:
    host = write_previous(tmp_path)
    journal = Journal.load(host)
    assert [h.allocation.dns_servers for h in held(journal)] == [("192.0.2.53",)]
    assert journal.section(DeleteRecord) == DeleteRecord("uid-1", ["kubeadmReset"], False)
    reports = journal.section(Reports)
    assert reports.pending and reports.evented["NetworkReady"] == "True:NetworkConfigured"
    record = journal.section(JoinRecord)
    assert [(a.outcome, a.reason, a.reset_before) for a in record.attempts] == [
        ("failed", "TokenExpired", False), ("joined", None, True)]
    assert record.commands[0].exit_status == 0 and record.resets[0].why == "half-joined"
    assert journal.section(CNIRecord).manifest_applied == "sha256:abc"
    assert journal.section(Ledger).held["uid-1/eth0/ipv4"].pool == "rack-1"
    journal.save()
    again = json.loads((tmp_path / JOURNAL.lstrip("/")).read_text())
    assert again["extra"] == PREVIOUS["extra"]  # the same keys: a rolled-back node reads it
