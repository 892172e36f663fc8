"""The in-cluster IPAM provider's claim controller as a client of an external API server
(MACHINE_AGENT_TEST_KUBECONFIG), for the sandbox's own namespace only: a real cluster
with just the CRDs installed has no provider, and the stand-in's controller
(machine_agent_sandbox.apiserver.ipampool) runs inside the stand-in.

Same arithmetic as the stand-in's (ipampool.pool_spans / first_free, which follow
cluster-api-ipam-provider-in-cluster) and the same `Ready` conditions on claims; it polls
instead of watching. Differences, all about cleanup: no finalizers (an IPAddress goes with
its claim by garbage collection through its controller owner reference, and one whose
claim is gone counts as free and is deleted), so deleting the sandbox's namespace never
waits on a controller that has stopped.
"""

from __future__ import annotations

import datetime
import logging
import threading
from typing import Any, Protocol

from machine_agent_sandbox.apiserver.ipampool import NO_ADDRESS, Exhausted, first_free, pool_spans
from machine_agent_sandbox.cluster import IPAM

Obj = dict[str, Any]
log = logging.getLogger(__name__)

POLL = 0.2
MERGE = "application/merge-patch+json"
POOL_KINDS = {"InClusterIPPool": "inclusterippools",
              "GlobalInClusterIPPool": "globalinclusterippools"}


class AdminAPI(Protocol):
    """Raw API access as an administrator: the sandbox's Admin, or a test's."""

    ns: str

    def call(self, method: str, path: str, body: Any = None, *,
             content_type: str = ..., ok: tuple[int, ...] = ...) -> Any: ...


class PoolClient:
    """Fulfils the IPAddressClaims of `admin.ns` from their pools until stopped. Also the
    provider the IPAM tests play against a real API server (tests/integration/ipam)."""

    def __init__(self, admin: AdminAPI) -> None:
        self.admin = admin
        self.errors: list[str] = []
        """What a poll could not do (the next one tries again); tests assert it empty."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sandbox-pool-client",
                                        daemon=True)

    def start(self) -> PoolClient:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def __enter__(self) -> PoolClient:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            try:
                self.reconcile()
            except Exception as err:  # an outage or an unexpected answer: poll again
                self.errors.append(str(err))
                log.info("sandbox pool client: %s", err)

    def _path(self, plural: str, version: str = "v1beta2") -> str:
        return f"/apis/{IPAM}/{version}/namespaces/{self.admin.ns}/{plural}"

    def reconcile(self) -> None:
        claims: list[Obj] = self.admin.call("GET", self._path("ipaddressclaims"))["items"]
        pending = [c for c in claims if not c["metadata"].get("deletionTimestamp")
                   and not (c.get("status") or {}).get("addressRef")]
        if not pending:
            return
        live = {c["metadata"]["name"] for c in claims}
        addresses: list[Obj] = self.admin.call("GET", self._path("ipaddresses"))["items"]
        held = []
        for address in addresses:
            if address["spec"]["claimRef"]["name"] in live:
                held.append(address)
            else:  # its claim is gone: the address is free
                self.admin.call("DELETE", f"{self._path('ipaddresses')}/"
                                f"{address['metadata']['name']}", ok=(200, 202, 404))
        for claim in pending:
            self._fulfil(claim, held)

    def _fulfil(self, claim: Obj, held: list[Obj]) -> None:
        meta, ref = claim["metadata"], (claim.get("spec") or {}).get("poolRef") or {}
        if ref.get("apiGroup") != IPAM or ref.get("kind") not in POOL_KINDS:
            return
        plural = POOL_KINDS[ref["kind"]]
        path = (f"/apis/{IPAM}/v1alpha2/{plural}/{ref['name']}"
                if ref["kind"] == "GlobalInClusterIPPool"
                else f"{self._path(plural, 'v1alpha2')}/{ref['name']}")
        pool: Obj = self.admin.call("GET", path, ok=(200, 404))
        if pool.get("kind") != ref["kind"]:
            self._ready(claim, "False", "PoolNotReady",
                        f'pool not found: failed to fetch pool: {plural}.{IPAM} '
                        f'"{ref["name"]}" not found')
            return
        spec = pool.get("spec") or {}
        in_use = [a["spec"]["address"] for a in held if a["spec"].get("poolRef") == ref]
        try:
            ip = first_free(pool_spans(spec), in_use + ([spec["gateway"]]
                                                        if spec.get("gateway") else []))
        except Exhausted:
            self._ready(claim, "False", "PoolExhausted", NO_ADDRESS)
            return
        except ValueError as exc:  # a pool the provider cannot read, e.g. prefix 40 on IPv4
            self._ready(claim, "False", "AllocationFailed",
                        f"failed to create or patch address: failed to convert pool to "
                        f"range: {exc}")
            return
        address: Obj = {
            "apiVersion": f"{IPAM}/v1beta2", "kind": "IPAddress",
            "metadata": {"name": meta["name"], "namespace": self.admin.ns,
                         "ownerReferences": [{
                             "apiVersion": f"{IPAM}/v1beta2", "kind": "IPAddressClaim",
                             "name": meta["name"], "uid": meta["uid"], "controller": True,
                             "blockOwnerDeletion": True}]},
            "spec": {"address": ip, "prefix": int(spec.get("prefix", 0)),
                     "claimRef": {"name": meta["name"]}, "poolRef": ref}}
        if spec.get("gateway"):
            address["spec"]["gateway"] = spec["gateway"]
        self.admin.call("POST", self._path("ipaddresses"), address, ok=(201, 409))
        held.append(address)
        self._ready(claim, "True", "AddressAllocated", "",
                    {"addressRef": {"name": meta["name"]}})

    def _ready(self, claim: Obj, status: str, reason: str, message: str,
               extra: Obj | None = None) -> None:
        """Set the claim's Ready condition (and `extra` status), unless it says so already."""
        old = [(c.get("status"), c.get("reason"), c.get("message"))
               for c in (claim.get("status") or {}).get("conditions") or []
               if c.get("type") == "Ready"]
        if not extra and old == [(status, reason, message)]:
            return
        name = claim["metadata"]["name"]
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.admin.call("PATCH", f"{self._path('ipaddressclaims')}/{name}/status", {
            "status": {**(extra or {}), "conditions": [{
                "type": "Ready", "status": status, "reason": reason, "message": message,
                "lastTransitionTime": now}]}}, content_type=MERGE, ok=(200, 404))
