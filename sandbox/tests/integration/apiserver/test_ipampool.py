"""The in-cluster IPAM pool controller of the stand-in (stand-in only: a real cluster may
not run the provider)."""

from __future__ import annotations

from typing import Any

import pytest
from machine_agent_sandbox.apiserver import ApiServer
from machine_agent_sandbox.apiserver.ipampool import first_free, pool_spans

from sandbox.tests.integration.apiserver.kubeclient import (
    IPAM,
    POOLS,
    Kube,
    claim,
    pool,
    wait_until,
)

Obj = dict[str, Any]


@pytest.fixture
def ipam(own_standin: ApiServer, admin: Kube, ns: str) -> Kube:
    return admin


def _claims(ns: str, name: str = "") -> str:
    return f"{IPAM}/namespaces/{ns}/ipaddressclaims" + (f"/{name}" if name else "")


def _make_pool(admin: Kube, ns: str, **kw: Any) -> None:
    body = pool(**kw)
    if body["kind"] == "InClusterIPPool":
        admin.check(admin.post(f"{POOLS}/namespaces/{ns}/inclusterippools", json=body), 201)
    else:
        admin.check(admin.post(f"{POOLS}/globalinclusterippools", json=body), 201)


def _address_of(admin: Kube, ns: str, name: str) -> Obj:
    def fulfilled() -> Obj | None:
        c = admin.check(admin.get(_claims(ns, name)), 200)
        ref = (c.get("status") or {}).get("addressRef", {}).get("name")
        if not ref:
            return None
        return admin.check(admin.get(f"{IPAM}/namespaces/{ns}/ipaddresses/{ref}"), 200)
    return wait_until(fulfilled)


def _ready(admin: Kube, ns: str, name: str) -> Obj:
    def cond() -> Obj | None:
        c = admin.check(admin.get(_claims(ns, name)), 200)
        return next((x for x in (c.get("status") or {}).get("conditions", [])
                     if x["type"] == "Ready"), None)
    return wait_until(cond)


def test_pool_arithmetic_follows_the_provider() -> None:
    spans = pool_spans({"addresses": ["192.0.2.0/30", "192.0.2.8-192.0.2.9", "192.0.2.20"],
                        "prefix": 24, "gateway": "192.0.2.1",
                        "excludedAddresses": ["192.0.2.9"]})
    # .0 is the network address of 192.0.2.0/24, .1 the gateway, .9 excluded
    assert first_free(spans, []) == "192.0.2.2"
    assert first_free(spans, ["192.0.2.2", "192.0.2.3"]) == "192.0.2.8"
    assert first_free(spans, ["192.0.2.2", "192.0.2.3", "192.0.2.8"]) == "192.0.2.20"
    v6 = pool_spans({"addresses": ["2001:db8::/126"], "prefix": 64})
    assert first_free(v6, []) == "2001:db8::1"  # the subnet-router anycast is skipped


def test_claims_get_sequential_addresses_skipping_gateway_and_exclusions(
        ipam: Kube, ns: str) -> None:
    _make_pool(ipam, ns, addresses=["192.0.2.1-192.0.2.6"], gateway="192.0.2.1",
               excluded=["192.0.2.3"])
    got = []
    for i in range(3):
        ipam.check(ipam.post(_claims(ns), json=claim(f"node-{i}")), 201)
        got.append(_address_of(ipam, ns, f"node-{i}"))
    assert [a["spec"]["address"] for a in got] == ["192.0.2.2", "192.0.2.4", "192.0.2.5"]
    first = got[0]
    assert first["spec"]["prefix"] == 24 and first["spec"]["gateway"] == "192.0.2.1"
    assert first["spec"]["claimRef"] == {"name": "node-0"}
    assert first["spec"]["poolRef"] == {"apiGroup": "ipam.cluster.x-k8s.io",
                                        "kind": "InClusterIPPool", "name": "pool"}
    owner = first["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("IPAddressClaim", "node-0",
                                                                   True)
    assert "ipam.cluster.x-k8s.io/ProtectAddress" in first["metadata"]["finalizers"]
    assert _ready(ipam, ns, "node-0")["status"] == "True"


def test_a_fulfilled_claim_keeps_its_address(ipam: Kube, ns: str) -> None:
    _make_pool(ipam, ns, addresses=["192.0.2.10-192.0.2.20"])
    ipam.check(ipam.post(_claims(ns), json=claim("node-0")), 201)
    before = _address_of(ipam, ns, "node-0")
    ipam.check(ipam.patch(f"{POOLS}/namespaces/{ns}/inclusterippools/pool",
                          {"spec": {"excludedAddresses": ["192.0.2.10"]}}), 200)
    ipam.check(ipam.patch(_claims(ns, "node-0"), {"metadata": {"labels": {"touch": "1"}}}),
               200)
    after = _address_of(ipam, ns, "node-0")
    assert after["spec"]["address"] == before["spec"]["address"] == "192.0.2.10"
    assert after["metadata"]["uid"] == before["metadata"]["uid"]


def test_an_exhausted_pool_is_reported_and_a_freed_address_is_reused(
        ipam: Kube, ns: str) -> None:
    _make_pool(ipam, ns, addresses=["192.0.2.10-192.0.2.11"])
    for name in ("node-0", "node-1", "node-2"):
        ipam.check(ipam.post(_claims(ns), json=claim(name)), 201)
    _address_of(ipam, ns, "node-1")
    ready = _ready(ipam, ns, "node-2")
    assert (ready["status"], ready["reason"]) == ("False", "PoolExhausted")
    assert ready["message"].endswith("failed to find free address: no address available")
    ipam.check(ipam.delete(_claims(ns, "node-0")), 200)
    wait_until(lambda: ipam.get(_claims(ns, "node-0")).status_code == 404)
    wait_until(lambda: ipam.get(f"{IPAM}/namespaces/{ns}/ipaddresses/node-0")
               .status_code == 404)
    assert _address_of(ipam, ns, "node-2")["spec"]["address"] == "192.0.2.10"


def test_a_missing_pool_is_reported_until_it_appears(ipam: Kube, ns: str) -> None:
    ipam.check(ipam.post(_claims(ns), json=claim("node-0", pool="later")), 201)
    ready = _ready(ipam, ns, "node-0")
    assert (ready["status"], ready["reason"]) == ("False", "PoolNotReady")
    assert "pool not found" in ready["message"]
    _make_pool(ipam, ns, name="later", addresses=["192.0.2.50"])
    assert _address_of(ipam, ns, "node-0")["spec"]["address"] == "192.0.2.50"


def test_a_global_pool_serves_claims_in_any_namespace(ipam: Kube, ns: str) -> None:
    name = f"{ns}-global"
    _make_pool(ipam, ns, name=name, kind="GlobalInClusterIPPool",
               addresses=["2001:db8::10-2001:db8::11"], prefix=64)
    try:
        ipam.check(ipam.post(_claims(ns), json=claim("node-0", pool=name,
                                                     kind="GlobalInClusterIPPool")), 201)
        assert _address_of(ipam, ns, "node-0")["spec"]["address"] == "2001:db8::10"
    finally:
        ipam.delete(f"{POOLS}/globalinclusterippools/{name}")


def test_claims_for_other_providers_are_left_alone(ipam: Kube, ns: str) -> None:
    body = claim("node-0")
    body["spec"]["poolRef"] = {"apiGroup": "ipam.example.com", "kind": "NetboxPool",
                               "name": "x"}
    ipam.check(ipam.post(_claims(ns), json=body), 201)
    _make_pool(ipam, ns)  # some activity for the controller
    c = ipam.check(ipam.get(_claims(ns, "node-0")), 200)
    assert "status" not in c and "finalizers" not in c["metadata"]


def test_conditions_can_be_switched_off_like_the_released_provider(tmp_path: Any) -> None:
    with ApiServer(tmp_path / "quiet", ipam_conditions=False) as api:
        admin = Kube(api.url, str(api.ca_path), token=api.admin_token)
        admin.check(admin.post(_claims("default"), json=claim("node-0", pool="none")), 201)
        wait_until(lambda: "ipam.cluster.x-k8s.io/ReleaseAddress" in admin.check(
            admin.get(_claims("default", "node-0")), 200)["metadata"].get("finalizers", []))
        assert "status" not in admin.check(admin.get(_claims("default", "node-0")), 200)
