"""Fault injection and request counters (stand-in only)."""

from __future__ import annotations

import time

import pytest
import requests
from machine_agent_sandbox.apiserver import ApiServer

from sandbox.tests.integration.apiserver.kubeclient import CAPI, Kube, machine


def _machines(ns: str) -> str:
    return f"{CAPI}/namespaces/{ns}/machines"


def test_429_carries_retry_after_for_the_given_count(own_standin: ApiServer, admin: Kube,
                                                     ns: str) -> None:
    fault = own_standin.faults.add("429", path=r"/machines$", method="GET", count=2,
                                    retry_after=3)
    for _ in range(2):
        resp = admin.get(_machines(ns))
        assert resp.status_code == 429
        assert resp.headers["Retry-After"] == "3"
        assert resp.json()["reason"] == "TooManyRequests"
    admin.check(admin.get(_machines(ns)), 200)
    assert fault.hits == 2
    admin.check(admin.post(_machines(ns), json=machine()), 201)  # POST never matched


def test_500_until_cleared(own_standin: ApiServer, admin: Kube, ns: str) -> None:
    own_standin.faults.add("500", path="/machines")
    for _ in range(3):
        reply = admin.check(admin.get(_machines(ns)), 500)
        assert reply["reason"] == "InternalError"
    own_standin.faults.clear()
    admin.check(admin.get(_machines(ns)), 200)


def test_latency_delays_the_answer(own_standin: ApiServer, admin: Kube, ns: str) -> None:
    own_standin.faults.add("latency", path="/machines", seconds=0.5, count=1)
    start = time.monotonic()
    admin.check(admin.get(_machines(ns)), 200)
    assert time.monotonic() - start >= 0.5


def test_a_dropped_connection_gets_no_answer(own_standin: ApiServer, admin: Kube,
                                             ns: str) -> None:
    own_standin.faults.add("drop", path="/machines", count=1)
    with pytest.raises(requests.ConnectionError):
        admin.get(_machines(ns))
    admin.check(admin.get(_machines(ns)), 200)


def test_a_closed_watch_ends_early(own_standin: ApiServer, admin: Kube, ns: str) -> None:
    for name in ("a", "b", "c"):
        admin.check(admin.post(_machines(ns), json=machine(name)), 201)
    own_standin.faults.add("close_watch", path="/machines", after_events=1, count=1)
    start = time.monotonic()
    events = list(admin.watch(_machines(ns), {"timeoutSeconds": "30"}))
    assert len(events) == 1 and time.monotonic() - start < 10


def test_410_on_list_and_on_watch(own_standin: ApiServer, admin: Kube, ns: str) -> None:
    own_standin.faults.add("410", path="/machines", count=2)
    assert admin.check(admin.get(_machines(ns)), 410)["reason"] == "Expired"
    events = list(admin.watch(_machines(ns), {"timeoutSeconds": "5"}))
    assert [(e["type"], e["object"]["code"]) for e in events] == [("ERROR", 410)]


def test_counters_count_requests_by_verb_and_resource(own_standin: ApiServer, admin: Kube,
                                                      ns: str) -> None:
    own_standin.reset_counters()
    admin.check(admin.post(_machines(ns), json=machine()), 201)
    admin.check(admin.get(f"{_machines(ns)}/worker-0"), 200)
    status = f"{_machines(ns)}/worker-0/status"
    admin.check(admin.patch(status, {"status": {"phase": "Provisioning"}}), 200)
    admin.check(admin.patch(status, {"status": {"phase": "Running"}}), 200)
    counts = own_standin.counters()
    assert counts[("create", "machines")] == 1
    assert counts[("get", "machines")] == 1
    assert counts[("patch", "machines/status")] == 2


def test_the_hooks_are_reachable_over_http_for_admins(own_standin: ApiServer, admin: Kube,
                                                      ns: str) -> None:
    admin.check(admin.post("/sandbox/v1/faults", json={"kind": "500", "path": "/machines",
                                                       "count": 1}), 201)
    admin.check(admin.get(_machines(ns)), 500)
    counters = admin.check(admin.get("/sandbox/v1/counters"), 200)["counters"]
    assert {"verb": "list", "resource": "machines", "count": 1} in counters
    admin.check(admin.post("/sandbox/v1/compact"), 200)
    nobody = admin.with_token(own_standin.make_token("someone"))
    nobody.check(nobody.get("/sandbox/v1/counters"), 403)
