"""The test playing the in-cluster IPAM provider against a real API server
(MACHINE_AGENT_TEST_KUBECONFIG), where no provider may run: it fulfils the claims of the
test's namespace over plain HTTP with the provider's own arithmetic (the stand-in's
agent.sandbox.apiserver.ipampool, which follows cluster-api-ipam-provider-in-cluster).
No finalizers: a deleted claim's IPAddress goes with it by garbage collection, and an
IPAddress whose claim is gone counts as free."""

from __future__ import annotations

import datetime
import threading
from typing import Any

from agent.sandbox.apiserver.ipampool import Exhausted, first_free, pool_spans
from tests.integration.kube.conftest import Admin

GROUP = "ipam.cluster.x-k8s.io"
POLL = 0.1
MERGE = "application/merge-patch+json"


class TestProvider:
    __test__ = False  # not a test class

    def __init__(self, admin: Admin) -> None:
        self.admin = admin
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="test-provider")
        self.errors: list[str] = []

    def __enter__(self) -> TestProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            try:
                self.reconcile()
            except AssertionError as err:  # an API answer the loop did not expect
                self.errors.append(str(err))

    def _ns(self, plural: str, version: str = "v1beta2") -> str:
        return f"/apis/{GROUP}/{version}/namespaces/{self.admin.ns}/{plural}"

    def reconcile(self) -> None:
        claims = self.admin.call("GET", self._ns("ipaddressclaims"))["items"]
        live = {c["metadata"]["name"] for c in claims}
        addresses = self.admin.call("GET", self._ns("ipaddresses"))["items"]
        for address in addresses:
            if address["spec"]["claimRef"]["name"] not in live:
                self.admin.call("DELETE", f"{self._ns('ipaddresses')}/"
                                          f"{address['metadata']['name']}", ok=(200, 404))
        held = [a for a in addresses if a["spec"]["claimRef"]["name"] in live]
        for claim in claims:
            if not claim["metadata"].get("deletionTimestamp") and not (
                    claim.get("status") or {}).get("addressRef"):
                self._fulfil(claim, held)

    def _fulfil(self, claim: dict[str, Any], held: list[dict[str, Any]]) -> None:
        meta, ref = claim["metadata"], claim["spec"]["poolRef"]
        path = (f"/apis/{GROUP}/v1alpha2/globalinclusterippools/{ref['name']}"
                if ref["kind"] == "GlobalInClusterIPPool"
                else f"{self._ns('inclusterippools', 'v1alpha2')}/{ref['name']}")
        pool = self.admin.call("GET", path, ok=(200, 404))
        if pool.get("kind") != ref["kind"]:
            self._ready(meta["name"], "False", "PoolNotReady", "pool not found")
            return
        spec = pool["spec"]
        in_use = [a["spec"]["address"] for a in held if a["spec"]["poolRef"] == ref]
        try:
            ip = first_free(pool_spans(spec), in_use + ([spec["gateway"]]
                                                        if spec.get("gateway") else []))
        except Exhausted:
            self._ready(meta["name"], "False", "PoolExhausted", "no address available")
            return
        address = {"apiVersion": f"{GROUP}/v1beta2", "kind": "IPAddress",
                   "metadata": {"name": meta["name"], "ownerReferences": [{
                       "apiVersion": f"{GROUP}/v1beta2", "kind": "IPAddressClaim",
                       "name": meta["name"], "uid": meta["uid"], "controller": True}]},
                   "spec": {"address": ip, "prefix": int(spec["prefix"]),
                            "claimRef": {"name": meta["name"]}, "poolRef": ref}}
        if spec.get("gateway"):
            address["spec"]["gateway"] = spec["gateway"]
        self.admin.call("POST", self._ns("ipaddresses"), address, ok=(201, 409))
        held.append(address)
        self._ready(meta["name"], "True", "AddressAllocated", "",
                    {"addressRef": {"name": meta["name"]}})

    def _ready(self, name: str, status: str, reason: str, message: str,
               extra: dict[str, Any] | None = None) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"status": {**(extra or {}), "conditions": [{
            "type": "Ready", "status": status, "reason": reason, "message": message,
            "lastTransitionTime": now}]}}
        self.admin.call("PATCH", f"{self._ns('ipaddressclaims')}/{name}/status", body,
                        content_type=MERGE, ok=(200, 404))
