"""`machine-agent doctor` on the sandbox, as the person on call runs it on the node: after
a bootstrap it passes; after each demo `--fault` it names the failing check and its fix.
Either way it changes nothing: the node's root tree (the journal and status files
included), its namespace and the management API's objects are the same afterwards."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest
from machine_agent_sandbox.cluster import IPAM
from machine_agent_sandbox.faults import CATALOGUE
from machine_agent_sandbox.netns import GATEWAY
from machine_agent_sandbox.node import Node
from machine_agent_sandbox.sandbox import Features, Sandbox

from agent.errors import Reason
from tests.integration.doctor.conftest import tree

pytestmark = pytest.mark.allow_processes

IPAM_MISSING = not Features.detect().ipam
NTP_SERVER = "203.0.113.123"
EXPECTED: dict[str, tuple[str, str, str]] = {
    # fault: (area, check, a word its fix must contain)
    "pool-exhausted": ("ipam", "claim:eth0/ipv4", "pool"),
    "gateway-down": ("network", f"gateway:{GATEWAY}", "gateway"),
    "address-in-use": ("network", "address-conflict", "address"),
    "ntp-down": ("time", f"server:{NTP_SERVER}", "NTP"),
    "token-expired": ("management", "bootstrap-token", "token"),
    # Discovery (the CA pin) and kubelet-start (the Node's name) are decided by the
    # workload cluster inside `kubeadm join`, which doctor does not run: the join area's
    # `kubeadm-join` check reports them from the last attempt, with the reason's fix.
    "ca-mismatch": ("join", "kubeadm-join", "caCertHashes"),
    "node-name-taken": ("join", "kubeadm-join", "Node"),
}
API = ("/apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}/machines",
       "/apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}/clusters",
       "/api/v1/namespaces/{ns}/secrets",
       "/api/v1/namespaces/{ns}/configmaps",
       "/apis/events.k8s.io/v1/namespaces/{ns}/events",
       f"/apis/{IPAM}/v1beta2/namespaces/{{ns}}/ipaddressclaims",
       f"/apis/{IPAM}/v1beta2/namespaces/{{ns}}/ipaddresses",
       f"/apis/{IPAM}/v1alpha2/namespaces/{{ns}}/inclusterippools")
"""What doctor must not change in the sandbox's namespace `ns`."""


def doctor(node: Node) -> tuple[int, dict[str, Any]]:
    """`machine-agent --root ROOT --netns NS doctor --json`, run inside the node's
    namespace: its exit status and its document."""
    done = subprocess.run(node.agent("doctor", "--json"), capture_output=True, text=True,
                          timeout=60, env=node.env())
    assert done.stdout.startswith("{"), done.stdout + done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    assert doc["exitCode"] == done.returncode
    return done.returncode, doc


# Carrier and DAD follow the wire and the kernel's timers, not configuration: the CNI
# proof's bridge loses its carrier a moment after its last port is gone, and an IPv6
# link-local address stays tentative for a second after a link comes up. What doctor
# could change (links, their UP flag, addresses, routes) is compared; those are not.
CARRIER = {"NO-CARRIER", "LOWER_UP", "linkdown"}
TRANSIENT = {"operstate", "tentative", "valid_life_time", "preferred_life_time"}


def _without_carrier(entry: Any) -> Any:
    if isinstance(entry, dict):
        return {k: _without_carrier(v) for k, v in entry.items() if k not in TRANSIENT}
    if isinstance(entry, list):
        return [_without_carrier(v) for v in entry if not (isinstance(v, str) and v in CARRIER)]
    return entry


def namespace(box: Sandbox, node: Node) -> dict[str, Any]:
    return {kind: _without_carrier(json.loads(box.network.ip("-j", "-n", node.netns, kind,
                                                             "show")))
            for kind in ("link", "addr", "route")}


def settled(box: Sandbox, node: Node) -> dict[str, Any]:
    """The namespace once the kernel has finished with the agent's run (the CNI proof's
    bridge loses its carrier a moment after its last port goes): the same for 1s."""
    seen, since, deadline = namespace(box, node), time.monotonic(), time.monotonic() + 15
    while time.monotonic() - since < 1.0:
        assert time.monotonic() < deadline, "the node's namespace does not settle"
        time.sleep(0.1)
        now = namespace(box, node)
        if now != seen:
            seen, since = now, time.monotonic()
    return seen


def snapshot(box: Sandbox, node: Node, ip: dict[str, Any] | None = None) -> dict[str, Any]:
    """What doctor must leave as it found it."""
    ip = ip if ip is not None else namespace(box, node)
    api = {}
    for path in (p.format(ns=box.admin.ns) for p in API):
        doc = box.admin.call("GET", path)
        # the items and their versions: a list's own resourceVersion is the server's
        # current one, which a real cluster moves every few seconds (lease renewals)
        api[path] = sorted((i["metadata"]["name"], i["metadata"]["resourceVersion"])
                           for i in doc["items"])
    return {"root": tree(node.root), "ip": ip, "api": api}


def diagnosed_without_change(box: Sandbox, node: Node) -> tuple[int, dict[str, Any]]:
    before = snapshot(box, node, settled(box, node))
    code, doc = doctor(node)
    after = snapshot(box, node)
    for part in before:
        assert after[part] == before[part], (f"doctor changed the node's {part}",
                                             _changed(before[part], after[part]))
    assert doc["errors"] == []
    return code, doc


def _changed(before: dict[str, Any], after: dict[str, Any]) -> list[Any]:
    return [(key, before.get(key), after.get(key))
            for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]


def by_name(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["phase"], c["name"]): c for c in doc["checks"]}


def test_doctor_passes_on_a_bootstrapped_node_and_changes_nothing(
        bring_up: Callable[[int], Sandbox]) -> None:
    box = bring_up(1)
    (node,) = box.nodes
    code, lines = node.run("run")
    assert code == 0, "\n".join(lines)
    journal = (node.root / "var/lib/machine-agent/journal.json").read_bytes()
    code, doc = diagnosed_without_change(box, node)
    failed = [c for c in doc["checks"] if c["status"] == "fail"]
    assert (code, failed) == (0, [])
    checks = by_name(doc)
    # the whole pipeline was looked at, live, on this node
    for key in (("management", "machine"), ("network", f"gateway:{GATEWAY}"),
                ("network", "address-conflict"), ("network", "plan"),
                ("time", f"server:{NTP_SERVER}"), ("time", "clock"), ("join", "node"),
                ("journal", "conditions"), ("journal", "reported")):
        assert checks[key]["status"] == "pass", checks[key]
    if not IPAM_MISSING:
        assert checks[("ipam", "claim:eth0/ipv4")]["details"]["address"] == "192.0.2.10"
    assert (node.root / "var/lib/machine-agent/journal.json").read_bytes() == journal


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.xfail(
        IPAM_MISSING and fault.needs_ipam, strict=True,
        reason="needs the `capi` IPAM plugin (branch ipam), not in this build"))
    for name, fault in CATALOGUE.items()])
def test_doctor_names_each_fault_with_its_fix_and_changes_nothing(
        name: str, bring_up: Callable[[int], Sandbox]) -> None:
    assert set(EXPECTED) == set(CATALOGUE), "a fault without its expected doctor check"
    fault = CATALOGUE[name]
    assert not (fault.needs_ipam and IPAM_MISSING), "the sandbox cannot arrange this fault"
    box = bring_up(1)
    (node,) = box.nodes
    fault.arrange(box)
    code, lines = node.run("run")
    assert code in (1, 3), "\n".join(lines)
    assert box.conditions(node)[fault.condition]["reason"] == str(fault.reason)
    code, doc = diagnosed_without_change(box, node)
    assert code == 1
    area, check, word = EXPECTED[name]
    found = by_name(doc)[(area, check)]
    assert found["status"] == "fail", found
    assert word.lower() in found["fix"].lower(), found
    if found["details"].get("source") == "journal":  # seen from the last run: says so
        assert found["details"]["reason"] == str(fault.reason), found
        assert found["seen"].startswith("not checked live ("), found
    assert str(Reason(fault.reason)) in json.dumps(doc["checks"])
