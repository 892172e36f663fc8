"""The crash harness's pieces: a node slot of one shared sandbox that is reset between runs
(fresh namespace, fresh root, a fresh Machine with its Secret, RBAC and token), and a
snapshot of everything a run leaves behind, in a form two runs can be compared in.

What is compared (`Outcome`):
- host: the node namespace's links (name, up/down, mtu), global addresses and routes of
  every table; every file under the node root with its mode (symlinks by target), minus
  BOOKKEEPING; the node's processes by name; network namespaces the run left behind.
- management API: the agent's Machine conditions (type, status, reason; CAPI's own Ready
  too), Events per reason about this Machine, and with the `capi` IPAM plugin the
  IPAddressClaims and IPAddresses (count per owner, no address twice, none orphaned).
- the workload cluster: how many joins registered this node's Node (counted on the Node by
  the request that registers it, so a kubeadm killed right after still counts), and its
  Node's Ready status there.

The credential the cluster issued the kubelet at join (in kubelet.conf) is new with every
join, as a real kubelet's client certificate is: files compare with it replaced by
`<kubelet-credential>`, like the management token.
"""

from __future__ import annotations

import collections
import json
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from machine_agent_sandbox.cluster import CAPI, CLUSTER, IPAM, seed_machine
from machine_agent_sandbox.kubeadm.kubelet_start import registrations
from machine_agent_sandbox.kubeadm.tls_bootstrap import credential_file
from machine_agent_sandbox.netns import WORKLOAD_ADDRESS, WORKLOAD_PORT
from machine_agent_sandbox.node import Addressing, Node
from machine_agent_sandbox.sandbox import IPAM_PLUGIN, Sandbox

from agent.kube.rbac import NodeIdentity, render_node_rbac

BOOKKEEPING = ("var/lib/machine-agent/journal.json", "var/lib/machine-agent/status.json",
               "run/machine-agent/kube/ca.crt")
"""Rewritten on every run by design (the journal, the local status file, the management CA
materialised at each start): their content is the run's history, not the node's state."""
GC_WAIT = 10.0
_RESETS = threading.Lock()
_NETNS_ADD = re.compile(r"run ip netns add (\S+)")


@dataclass
class Outcome:
    links: list[tuple[str, bool, int]]
    addresses: list[tuple[str, str]]
    routes: list[str]
    files: dict[str, str]
    processes: list[str]
    stray_namespaces: list[str]
    """Namespaces the runs named in their logs (CNI checks) that still exist."""
    conditions: dict[str, tuple[str, str]]
    events: dict[str, int]
    claims: dict[str, Any]
    joins: int
    node_ready: str
    """The Node's Ready status on the workload cluster ("absent": not registered)."""
    problems: list[str] = field(default_factory=list)
    """Invariants broken in this run alone (an address twice, an orphaned claim)."""

    def differences(self, reference: Outcome) -> list[str]:
        out = []
        for name, mine in vars(self).items():
            theirs = getattr(reference, name)
            if name != "problems" and mine != theirs:
                out.append(f"{name}: {_diff(theirs, mine)}")
        return out + self.problems


def _diff(expected: Any, got: Any) -> str:
    if isinstance(expected, dict) and isinstance(got, dict):
        keys = sorted(set(expected) | set(got))
        parts = [f"{k}: {expected.get(k, '<absent>')!r} -> {got.get(k, '<absent>')!r}"
                 for k in keys if expected.get(k) != got.get(k)]
        return "; ".join(parts)[:3000]
    if isinstance(expected, list) and isinstance(got, list):
        return (f"missing {[e for e in expected if e not in got]}, "
                f"extra {[g for g in got if g not in expected]}")
    return f"expected {expected!r}, got {got!r}"


class Slot:
    """Node `index` of a shared sandbox, reset to a freshly booted machine on demand."""

    def __init__(self, box: Sandbox, node: Node) -> None:
        self.box = box
        self.node = node
        self.token = ""
        self.uid = ""

    # -- reset --------------------------------------------------------------------------

    def reset(self) -> None:
        with _RESETS:  # the sandbox's record and the router's links are shared
            self._reset()

    def _reset(self) -> None:
        box, node = self.box, self.node
        registry = box.registry
        registry._empty_namespace(node.netns)  # the node's chronyd, anything it started
        for peer in (f"e{node.index}", f"p{node.index}"):  # a namespace goes lazily
            box.network.router_ip("link", "del", peer)
        registry.tools.run(["ip", "netns", "delete", node.netns], timeout=10)
        registry.record.namespaces.remove(node.netns)
        assert box.network.add_node(node.index) == node.netns
        self._forget_machine()
        self.token = seed_machine(box.admin, node.name, f"{WORKLOAD_ADDRESS}:{WORKLOAD_PORT}",
                                  ipam_claims=_addressing(box).claims)
        self.uid = box.admin.machine(node.name)["metadata"]["uid"]
        _wipe(node.home, keep=node.runtime_socket)
        node.workload.pop("joins", None)
        node.workload.pop("readyNodes", None)
        node.prepare(registry, box.admin, token=self.token,
                     addressing=_addressing(box), extra=box._cni_settings(node))

    def _forget_machine(self) -> None:
        """Delete the Machine (its claims go with it, by owner), Secret, Role, binding and
        ServiceAccount, and the workload cluster's Node (CAPI's Machine controller deletes
        it with the Machine: a Node left over would be false evidence of a join)."""
        admin, name = self.box.admin, self.node.name
        self.box.workload.call("DELETE", f"/api/v1/nodes/{name}", ok=(200, 202, 404))
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{admin.ns}"
        role, binding = _node_rbac_names(admin.ns, name)
        for path in (f"/apis/{CAPI}/namespaces/{admin.ns}/machines/{name}",
                     f"/api/v1/namespaces/{admin.ns}/secrets/{name}-bootstrap",
                     f"{rbac}/roles/{role}", f"{rbac}/rolebindings/{binding}",
                     f"/api/v1/namespaces/{admin.ns}/serviceaccounts/machine-agent-{name}"):
            admin.call("DELETE", path, ok=(200, 202, 404))
        deadline = time.monotonic() + GC_WAIT
        while self.uid and self._owned_claims(self.uid):
            assert time.monotonic() < deadline, "the old Machine's claims were not collected"
            time.sleep(0.05)

    def _owned_claims(self, uid: str) -> list[dict[str, Any]]:
        if not self.box.features.ipam:
            return []
        return [c for c in self.box.admin.claims()
                if uid in {o.get("uid") for o in c["metadata"].get("ownerReferences", [])}]

    # -- the run ------------------------------------------------------------------------

    def run(self, crash_after: int | None = None) -> tuple[int, list[str]]:
        env = {"MACHINE_AGENT_CRASH_AFTER": str(crash_after)} if crash_after else {}
        return self.node.run("--log-level", "debug", "run", env=env)

    # -- the outcome --------------------------------------------------------------------

    def outcome(self, *logs: list[str]) -> Outcome:
        box, node = self.box, self.node
        problems: list[str] = []
        address = _data_address(box, node)
        subst = {self.token: "<management-token>"}
        if address:
            subst[address] = "<address>"
        kubelet = _kubelet_credential(node.root)
        if kubelet:
            subst[kubelet] = "<kubelet-credential>"
        return Outcome(
            links=_links(box, node),
            addresses=[(link, subst.get(a, a)) for link, a in _addresses(box, node)],
            routes=[_replace(r, subst) for r in _routes(box, node)],
            files=_files(node.root, subst),
            processes=_processes(box, node),
            stray_namespaces=sorted(_namespaces(box) & _named_namespaces(*logs)),
            conditions=_conditions(box.admin.machine(node.name)),
            events=self._events(),
            claims=self._claims(problems),
            joins=registrations(box.workload.node(node.name)),
            node_ready=_node_ready(box, node),
            problems=problems)

    def _events(self) -> dict[str, int]:
        items = self.box.admin.call(
            "GET", f"/apis/events.k8s.io/v1/namespaces/{self.box.admin.ns}/events")["items"]
        mine = [e for e in items if (e.get("regarding") or {}).get("uid") == self.uid]
        return dict(sorted(collections.Counter(e.get("reason", "") for e in mine).items()))

    def _claims(self, problems: list[str]) -> dict[str, Any]:
        """This Machine's claims and addresses (other nodes may be mid-reset now: the
        pool-wide orphan check waits for quiet, in `pool_problems`)."""
        if not self.box.features.ipam:
            return {}
        addresses = _ip_addresses(self.box)
        taken = collections.Counter(a["spec"]["address"] for a in addresses)
        problems += [f"address {a} handed out {n} times" for a, n in taken.items() if n > 1]
        mine = self._owned_claims(self.uid)
        names = {c["metadata"]["name"] for c in mine}
        return {"claims": len(mine),
                "bound": sum(1 for c in mine if (c.get("status") or {}).get("addressRef")),
                "addresses": sum(1 for a in addresses if a["spec"]["claimRef"]["name"] in names),
                "pools": sorted(c["spec"]["poolRef"]["name"] for c in mine)}


def pool_problems(box: Sandbox) -> list[str]:
    """Once every node is quiet: no claim without its Machine, no address without its
    claim (the garbage collector and the pool controller given GC_WAIT to finish)."""
    if not box.features.ipam:
        return []
    deadline = time.monotonic() + GC_WAIT
    while True:
        machines = {m["metadata"]["uid"] for m in box.admin.call(
            "GET", f"/apis/{CAPI}/namespaces/{box.admin.ns}/machines")["items"]}
        claims = box.admin.claims()
        names = {c["metadata"]["name"] for c in claims}
        problems = [f"claim {c['metadata']['name']} is orphaned" for c in claims
                    if not {o.get("uid") for o in c["metadata"].get("ownerReferences", [])}
                    & machines]
        problems += [f"IPAddress {a['metadata']['name']} names no existing claim"
                     for a in _ip_addresses(box) if a["spec"]["claimRef"]["name"] not in names]
        if not problems or time.monotonic() > deadline:
            return problems
        time.sleep(0.1)


def _ip_addresses(box: Sandbox) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = box.admin.call(
        "GET", f"/apis/{IPAM}/v1beta2/namespaces/{box.admin.ns}/ipaddresses")["items"]
    return items


def _addressing(box: Sandbox) -> Addressing:
    return Addressing(IPAM_PLUGIN if box.features.ipam else None)


def _wipe(home: Path, keep: Path) -> None:
    """Remove everything under `home` but `keep` (the runtime socket the sandbox's
    endpoints process listens on) and the directories leading to it."""
    for entry in home.iterdir():
        if entry == keep:
            continue
        if keep.is_relative_to(entry) and entry.is_dir() and not entry.is_symlink():
            _wipe(entry, keep)
        elif entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _ip_json(box: Sandbox, node: Node, *args: str) -> list[dict[str, Any]]:
    out = box.network.ip("-n", node.netns, "-j", *args)
    doc: list[dict[str, Any]] = json.loads(out or "[]")
    return doc


def _links(box: Sandbox, node: Node) -> list[tuple[str, bool, int]]:
    return sorted((link["ifname"], "UP" in link.get("flags", []), int(link.get("mtu", 0)))
                  for link in _ip_json(box, node, "link", "show"))


def _global(address: str) -> bool:
    return not address.lower().startswith("fe80:")


def _addresses(box: Sandbox, node: Node) -> list[tuple[str, str]]:
    return sorted((link["ifname"], f"{a['local']}/{a['prefixlen']}")
                  for link in _ip_json(box, node, "addr", "show")
                  for a in link.get("addr_info", []) if _global(a["local"]))


def _data_address(box: Sandbox, node: Node) -> str:
    found = [a for link, a in _addresses(box, node) if link == "eth0"]
    return found[0] if found else ""


def _routes(box: Sandbox, node: Node) -> list[str]:
    """Every route of every table, link-local and multicast ones aside (they come with
    the links themselves), as `ip route` spells them."""
    out = []
    for family in ("-4", "-6"):
        text = box.network.ip("-n", node.netns, family, "route", "show", "table", "all")
        for line in text.splitlines():
            if any(w in line for w in ("fe80::", "ff00::", "multicast", "fe80:")):
                continue
            # `linkdown` is the carrier of the moment (cni0 loses it once the check pod
            # is gone, a moment after the run), not configuration.
            out.append(" ".join(w for w in line.split() if w != "linkdown"))
    return sorted(out)


def _replace(text: str, subst: dict[str, str]) -> str:
    for old, new in subst.items():
        if old:
            text = text.replace(old, new).replace(old.split("/")[0], new)
    return text


def _files(root: Path, subst: dict[str, str]) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if rel in BOOKKEEPING or path.is_socket():
            continue
        mode = oct(path.lstat().st_mode & 0o7777)
        rel = _STAMPED.sub("kubelet-client-<issued>.pem", rel)
        if path.is_symlink():
            out[rel] = f"-> {_STAMPED.sub('kubelet-client-<issued>.pem', str(path.readlink()))}"
        elif path.is_dir():
            out[rel] = f"dir {mode}"
        else:
            out[rel] = f"{mode} {_replace(path.read_text(errors='replace'), subst)}"
    return out


def _processes(box: Sandbox, node: Node) -> list[str]:
    pids = box.network.registry.tools.run(["ip", "netns", "pids", node.netns],
                                          mutates=False, timeout=10).stdout.split()
    names = []
    for pid in pids:
        try:
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            continue  # ended meanwhile
    return sorted(names)


def _namespaces(box: Sandbox) -> set[str]:
    out = box.network.registry.tools.run(["ip", "netns", "list"], mutates=False,
                                         timeout=10).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _named_namespaces(*logs: list[str]) -> set[str]:
    return {m.group(1) for log in logs for line in log
            if (m := _NETNS_ADD.search(line))}


def _kubelet_credential(root: Path) -> str | None:
    """The kubelet's client certificate and key (its TLS bootstrap's, new each join)."""
    try:
        conf = yaml.safe_load((root / "etc/kubernetes/kubelet.conf").read_text())
        pem = credential_file(root, conf["users"][0]["user"] or {})
        return pem.read_text() if pem is not None else None
    except OSError:
        return None


_STAMPED = re.compile(r"kubelet-client-\d{4}(?:-\d\d){5}\.pem")
"""The kubelet's certificate file is named after the time it was issued."""


def _node_ready(box: Sandbox, node: Node) -> str:
    found = box.workload.node(node.name)
    if found is None:
        return "absent"
    return next((str(c["status"]) for c in found.get("status", {}).get("conditions", [])
                 if c["type"] == "Ready"), "no Ready condition")


def _conditions(machine: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"])
            for c in machine.get("status", {}).get("conditions", [])}


def _node_rbac_names(namespace: str, machine: str) -> list[str]:
    """The Role and RoleBinding names the shipped template gives a node (for the reset)."""
    docs = yaml.safe_load_all(render_node_rbac(NodeIdentity(
        namespace, machine, CLUSTER, f"{machine}-bootstrap", f"machine-agent-{machine}")))
    return [d["metadata"]["name"] for d in docs]

