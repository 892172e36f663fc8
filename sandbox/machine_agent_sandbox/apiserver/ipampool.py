"""The in-cluster IPAM provider's claim controller, inside the stand-in.

Behaves like kubernetes-sigs/cluster-api-ipam-provider-in-cluster (pkg/ipamutil
reconciler + internal/poolutil): for an IPAddressClaim whose `spec.poolRef` names an
`InClusterIPPool` (same namespace) or `GlobalInClusterIPPool` of ipam.cluster.x-k8s.io,
it adds the `ipam.cluster.x-k8s.io/ReleaseAddress` finalizer, allocates the first free
address of the pool — `spec.addresses` (IPs, `a-b` ranges, CIDRs) minus
`spec.excludedAddresses`, minus the network (and, for IPv4, broadcast) address of the
subnet `first address/prefix` unless `allocateReservedIPAddresses`, minus the gateway
and every address already allocated from the pool — and creates an IPAddress of the
claim's name (finalizer `ipam.cluster.x-k8s.io/ProtectAddress`, owned by the claim as
controller and by the pool; spec address/prefix/gateway/claimRef/poolRef), then sets
`status.addressRef.name` on the claim. A claim that has its address keeps it. Deleting
a claim deletes its IPAddress, freeing the address, then lets the claim go.

Conditions: the released provider (commit bc27dd72) sets none; it only logs
"the referenced pool could not be found" or fails the reconcile with
"failed to create or patch address: failed to find free address: no address available".
With `conditions=True` the stand-in also sets `Ready` on the claim with Cluster API's
IPAM reasons (as the provider's pending change does): False/`PoolNotReady` when the pool
is missing, False/`PoolExhausted` when it is full, True/`AddressAllocated` once
fulfilled; messages carry the provider's error texts. Client code must not rely on it.
Not modelled: pool status counts, pause annotations' Cluster lookup, grace periods.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
import queue
import threading
from typing import Any

from . import meta as mt
from .calls import MERGE, Call
from .objects import Objects
from .status import ApiError
from .store import Event, Subscription

Obj = dict[str, Any]
log = logging.getLogger(__name__)

GROUP = "ipam.cluster.x-k8s.io"
POOL_KINDS = {"InClusterIPPool": "inclusterippools",
              "GlobalInClusterIPPool": "globalinclusterippools"}
RELEASE = "ipam.cluster.x-k8s.io/ReleaseAddress"
PROTECT = "ipam.cluster.x-k8s.io/ProtectAddress"
PAUSED = "cluster.x-k8s.io/paused"
CLUSTER_LABEL = "cluster.x-k8s.io/cluster-name"
MANAGER = "manager"
NO_ADDRESS = ("failed to create or patch address: failed to find free address: "
              "no address available")

Span = tuple[int, int, int]  # (ip version, first, last) as integers

CLAIMS = f"{GROUP}/ipaddressclaims"
ADDRESSES = f"{GROUP}/ipaddresses"


class Exhausted(Exception):
    pass


@functools.lru_cache(maxsize=16384)
def _span(text: str) -> Span:
    """One entry as a span; cached, since every allocation reads every address in use
    (under the store's lock, which every request waits for)."""
    if "-" in text:
        a, b = (ipaddress.ip_address(x.strip()) for x in text.split("-", 1))
        return (a.version, int(a), int(b))
    if "/" in text:
        net = ipaddress.ip_network(text, strict=False)
        return (net.version, int(net.network_address), int(net.broadcast_address))
    ip = ipaddress.ip_address(text)
    return (ip.version, int(ip), int(ip))


def _spans(entries: list[str]) -> list[Span]:
    return sorted(_span(text) for text in entries)


def _subtract(spans: list[Span], cut: Span) -> list[Span]:
    out: list[Span] = []
    for v, lo, hi in spans:
        if v != cut[0] or cut[2] < lo or cut[1] > hi:
            out.append((v, lo, hi))
            continue
        if lo < cut[1]:
            out.append((v, lo, cut[1] - 1))
        if cut[2] < hi:
            out.append((v, cut[2] + 1, hi))
    return out


def pool_spans(spec: Obj) -> list[Span]:
    """poolutil.PoolSpecToIPSet: what the pool may hand out."""
    spans = _spans(list(spec.get("addresses") or []))
    for cut in _spans(list(spec.get("excludedAddresses") or [])):
        spans = _subtract(spans, cut)
    if spans and not spec.get("allocateReservedIPAddresses"):
        v, first, _ = spans[0]
        subnet = ipaddress.ip_network(
            f"{ipaddress.ip_address(first)}/{int(spec.get('prefix', 0))}", strict=False)
        spans = _subtract(spans, (v, int(subnet.network_address), int(subnet.network_address)))
        if v == 4:
            spans = _subtract(spans, (v, int(subnet.broadcast_address),
                                      int(subnet.broadcast_address)))
    if spec.get("gateway"):
        gw = ipaddress.ip_address(spec["gateway"])
        spans = _subtract(spans, (gw.version, int(gw), int(gw)))
    return spans


def first_free(spans: list[Span], in_use: list[str]) -> str:
    """poolutil.FindFreeAddress: the lowest address of the pool not in use."""
    used = {(v, n) for v, lo, hi in _spans([a for a in in_use if a]) for n in range(lo, hi + 1)}
    for v, lo, hi in spans:
        n = lo
        while n <= hi:
            if (v, n) not in used:
                return str(ipaddress.ip_address(n) if v == 4 else ipaddress.IPv6Address(n))
            n += 1
    raise Exhausted("no address available")


class PoolController:
    def __init__(self, objects: Objects, conditions: bool = True) -> None:
        self._objects = objects
        self._conditions = conditions
        self._queue: queue.SimpleQueue[tuple[str, str] | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        sub, _, _ = self._objects.store.subscribe(None, None, None)
        for target, name in ((self._watch, "sandbox-ipam-events"),
                             (self._work, "sandbox-ipam-reconcile")):
            t = threading.Thread(target=target, args=(sub,), name=name, daemon=True)
            t.start()
            self._threads.append(t)
        claims, _ = self._objects.store.list(CLAIMS)
        for c in claims:
            self._queue.put((c["metadata"]["namespace"], c["metadata"]["name"]))

    def stop(self) -> None:
        self._stop.set()
        self._queue.put(None)
        for t in self._threads:
            t.join(timeout=5)

    # --- events to work ---------------------------------------------------------------

    def _watch(self, sub: Subscription) -> None:
        try:
            while not self._stop.is_set():
                try:
                    ev = sub.events.get(timeout=0.1)
                except queue.Empty:
                    continue
                for key in self._keys_for(ev):
                    self._queue.put(key)
        finally:
            self._objects.store.unsubscribe(sub)

    def _keys_for(self, ev: Event) -> list[tuple[str, str]]:
        meta = ev.obj["metadata"]
        if ev.res_id == CLAIMS and ev.type != "DELETED":
            return [(meta["namespace"], meta["name"])]
        pool_ref: Obj | None = None
        if ev.res_id in (f"{GROUP}/{p}" for p in POOL_KINDS.values()):
            pool_ref = {"kind": ev.obj.get("kind"), "name": meta["name"]}
        elif ev.res_id == ADDRESSES:
            pool_ref = (ev.obj.get("spec") or {}).get("poolRef") or {}
            if ev.type != "DELETED":
                return [(meta["namespace"], meta["name"])]
        if pool_ref is None:
            return []
        claims, _ = self._objects.store.view(CLAIMS)
        return [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in claims
                if ((c.get("spec") or {}).get("poolRef") or {}).get("name") == pool_ref["name"]
                and c["spec"]["poolRef"].get("kind") == pool_ref["kind"]]

    def _work(self, _sub: Subscription) -> None:
        while not self._stop.is_set():
            key = self._queue.get()
            if key is None:
                return
            try:
                with self._objects.store.lock:
                    self.reconcile(*key)
            except ApiError as err:
                log.info("ipam: claim %s/%s: %s", key[0], key[1], err.message)
            except Exception:
                log.exception("ipam: reconciling claim %s/%s failed", *key)

    # --- the reconcile ------------------------------------------------------------------

    def _call(self, plural: str, namespace: str, name: str, sub: str = "") -> Call:
        res = self._objects.registry.by_id(f"{GROUP}/{plural}")
        return Call("patch", res, res.storage_version, namespace, name, sub,
                    {"fieldManager": MANAGER}, user_agent=MANAGER)

    def _patch(self, plural: str, namespace: str, name: str, patch: Obj, sub: str = "") -> None:
        self._objects.patch(self._call(plural, namespace, name, sub),
                            json.dumps(patch).encode(), MERGE)

    def reconcile(self, namespace: str, name: str) -> None:
        store = self._objects.store
        claim = store.get(CLAIMS, namespace, name)
        if claim is None:
            address = store.get(ADDRESSES, namespace, name)
            if address is not None and mt.deleting(address):
                self._unprotect(address)
            return
        ref = (claim.get("spec") or {}).get("poolRef") or {}
        if ref.get("apiGroup") != GROUP or ref.get("kind") not in POOL_KINDS:
            return
        if mt.deleting(claim):
            address = store.get(ADDRESSES, namespace, name)
            if address is not None:
                self._unprotect(address)
                if store.get(ADDRESSES, namespace, name) is not None:
                    self._objects.delete(self._call("ipaddresses", namespace, name), None)
            self._patch("ipaddressclaims", namespace, name, {"metadata": {"finalizers": [
                f for f in mt.finalizers(claim) if f != RELEASE] or None}})
            return
        if RELEASE not in mt.finalizers(claim):
            self._patch("ipaddressclaims", namespace, name,
                        {"metadata": {"finalizers": [*mt.finalizers(claim), RELEASE]}})
        plural = POOL_KINDS[ref["kind"]]
        pool_ns = namespace if ref["kind"] == "InClusterIPPool" else ""
        pool = store.get(f"{GROUP}/{plural}", pool_ns, ref.get("name", ""))
        if pool is None:
            log.info("ipam: the referenced pool could not be found (claim %s/%s)", namespace, name)
            self._ready(claim, "False", "PoolNotReady",
                        f'pool not found: failed to fetch pool: {plural}.{GROUP} '
                        f'"{ref.get("name")}" not found')
            return
        if PAUSED in (pool["metadata"].get("annotations") or {}) or PAUSED in (
                claim["metadata"].get("annotations") or {}):
            return
        address = self._ensure_address(claim, pool, ref, pool_ns)
        if address is None:
            return
        if ((claim.get("status") or {}).get("addressRef") or {}).get("name") != name:
            self._patch("ipaddressclaims", namespace, name,
                        {"status": {"addressRef": {"name": name}}}, "status")
        self._ready(claim, "True", "AddressAllocated", "")

    def _ensure_address(self, claim: Obj, pool: Obj, ref: Obj, pool_ns: str) -> Obj | None:
        store = self._objects.store
        meta = claim["metadata"]
        mine = store.get(ADDRESSES, meta["namespace"], meta["name"])
        if mine is not None:  # before the pool's addresses: every claim event reconciles
            return mine
        pool_ref = {"apiGroup": GROUP, "kind": ref["kind"], "name": ref["name"]}
        in_use, _ = store.view(ADDRESSES, pool_ns or None, lambda a: (
            (a.get("spec") or {}).get("poolRef") or {}) == pool_ref)
        spec = pool.get("spec") or {}
        try:
            ip = first_free(pool_spans(spec), [a["spec"].get("address", "") for a in in_use]
                            + ([spec["gateway"]] if spec.get("gateway") else []))
        except Exhausted:
            log.info("ipam: claim %s/%s: %s", meta["namespace"], meta["name"], NO_ADDRESS)
            self._ready(claim, "False", "PoolExhausted", NO_ADDRESS)
            return None
        except ValueError as exc:
            self._ready(claim, "False", "AllocationFailed",
                        f"failed to create or patch address: failed to convert pool to "
                        f"range: {exc}")
            return None
        labels = {CLUSTER_LABEL: meta["labels"][CLUSTER_LABEL]} if CLUSTER_LABEL in (
            meta.get("labels") or {}) else None
        address: Obj = {
            "apiVersion": f"{GROUP}/v1beta2", "kind": "IPAddress",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "finalizers": [PROTECT], "ownerReferences": [
                             {"apiVersion": f"{GROUP}/v1beta2", "kind": "IPAddressClaim",
                              "name": meta["name"], "uid": meta["uid"], "controller": True,
                              "blockOwnerDeletion": True},
                             {"apiVersion": pool["apiVersion"], "kind": pool["kind"],
                              "name": pool["metadata"]["name"],
                              "uid": pool["metadata"]["uid"], "blockOwnerDeletion": True}]},
            "spec": {"address": ip, "prefix": int(spec.get("prefix", 0)),
                     "claimRef": {"name": meta["name"]},
                     "poolRef": {"apiGroup": GROUP, "kind": ref["kind"], "name": ref["name"]}}}
        if labels:
            address["metadata"]["labels"] = labels
        if spec.get("gateway"):
            address["spec"]["gateway"] = spec["gateway"]
        call = self._call("ipaddresses", meta["namespace"], "")
        call.verb = "create"
        return self._objects.create(call, address).body

    def _unprotect(self, address: Obj) -> None:
        meta = address["metadata"]
        if PROTECT in mt.finalizers(address):
            self._patch("ipaddresses", meta["namespace"], meta["name"], {"metadata": {
                "finalizers": [f for f in mt.finalizers(address) if f != PROTECT] or None}})

    def _ready(self, claim: Obj, status: str, reason: str, message: str) -> None:
        if not self._conditions:
            return
        meta = claim["metadata"]
        fresh = self._objects.store.get(CLAIMS, meta["namespace"], meta["name"]) or claim
        conditions = list((fresh.get("status") or {}).get("conditions") or [])
        old = next((c for c in conditions if c.get("type") == "Ready"), None)
        if old and (old.get("status"), old.get("reason"), old.get("message")) == (
                status, reason, message):
            return
        cond = {"type": "Ready", "status": status, "reason": reason, "message": message,
                "observedGeneration": fresh["metadata"].get("generation", 1),
                "lastTransitionTime": old["lastTransitionTime"]
                if old and old.get("status") == status else mt.now()}
        conditions = [c for c in conditions if c.get("type") != "Ready"] + [cond]
        self._patch("ipaddressclaims", meta["namespace"], meta["name"],
                    {"status": {"conditions": conditions}}, "status")
