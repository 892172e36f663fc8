"""The fault proxy the management-cluster tests put in front of whichever API server
they use (testkit/faultproxy.py): it passes everything through, and each fault does what
it says, against the stand-in in CI and a real cluster with MACHINE_AGENT_TEST_KUBECONFIG."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from machine_agent_sandbox.testkit.faultproxy import FaultProxy

from sandbox.tests.integration.apiserver.kubeclient import CAPI, Kube, machine


@pytest.fixture
def proxy(admin: Kube, tmp_path: Path) -> Iterator[FaultProxy]:
    with FaultProxy(admin.base, admin.verify, tmp_path / "proxy", admin.cert) as running:
        yield running


@pytest.fixture
def via(admin: Kube, proxy: FaultProxy) -> Kube:
    client = Kube(proxy.url, str(proxy.ca_path), token=admin.token)
    client.ns = admin.ns
    return client


def test_requests_and_watches_pass_through_and_are_counted(
        via: Kube, proxy: FaultProxy, ns: str) -> None:
    created = via.check(via.post(f"{CAPI}/namespaces/{ns}/machines", json=machine("a")), 201)
    assert via.check(via.get(f"{CAPI}/namespaces/{ns}/machines/a"), 200)["metadata"][
        "uid"] == created["metadata"]["uid"]
    events = list(via.watch(f"{CAPI}/namespaces/{ns}/machines", {"timeoutSeconds": "1"}))
    assert [e["type"] for e in events] == ["ADDED"]
    counted = proxy.counters()
    assert (counted[("create", "machines")], counted[("get", "machines")],
            counted[("watch", "machines")]) == (1, 1, 1)


@pytest.mark.parametrize("kind", ["drop", "reset"])
def test_a_dropped_or_reset_connection_gets_no_answer(via: Kube, proxy: FaultProxy,
                                                      ns: str, kind: str) -> None:
    proxy.faults.add(kind, count=1)
    with pytest.raises(requests.ConnectionError):
        via.get(f"{CAPI}/namespaces/{ns}/machines")
    via.check(via.get(f"{CAPI}/namespaces/{ns}/machines"), 200)  # one time only


@pytest.mark.parametrize(("kind", "code", "reason"), [
    ("500", 500, "InternalError"), ("503", 503, "ServiceUnavailable"),
    ("429", 429, "TooManyRequests")])
def test_error_answers_are_kubernetes_statuses(via: Kube, proxy: FaultProxy, ns: str,
                                               kind: str, code: int, reason: str) -> None:
    proxy.faults.add(kind, path=r"/machines$", count=1, retry_after=7)
    reply = via.get(f"{CAPI}/namespaces/{ns}/machines")
    assert (reply.status_code, reply.json()["reason"]) == (code, reason)
    if kind == "429":
        assert reply.headers["Retry-After"] == "7"


def test_latency_holds_the_request_back(via: Kube, proxy: FaultProxy, ns: str) -> None:
    proxy.faults.add("latency", seconds=0.5, count=1)
    started = time.monotonic()
    via.check(via.get(f"{CAPI}/namespaces/{ns}/machines"), 200)
    assert time.monotonic() - started >= 0.5


def test_a_watch_closed_mid_stream_ends_after_the_events_it_was_allowed(
        via: Kube, admin: Kube, proxy: FaultProxy, ns: str) -> None:
    for name in ("a", "b", "c"):
        admin.check(admin.post(f"{CAPI}/namespaces/{ns}/machines", json=machine(name)), 201)
    proxy.faults.add("close_watch", path=r"/machines$", count=1, after_events=2)
    started = time.monotonic()
    events = list(via.watch(f"{CAPI}/namespaces/{ns}/machines", {"timeoutSeconds": "5"}))
    assert [e["object"]["metadata"]["name"] for e in events] == ["a", "b"]
    assert time.monotonic() - started < 4  # closed, not timed out


def test_gone_answers_as_a_compacted_server_does(via: Kube, proxy: FaultProxy,
                                                 ns: str) -> None:
    proxy.faults.add("410", path=r"/machines$", count=2)
    listed = via.get(f"{CAPI}/namespaces/{ns}/machines")
    assert (listed.status_code, listed.json()["reason"]) == (410, "Expired")
    with via.session.get(via.base + f"{CAPI}/namespaces/{ns}/machines",
                         params={"watch": "1", "resourceVersion": "1"}, stream=True,
                         timeout=10) as resp:
        assert resp.status_code == 200
        events = [json.loads(line) for line in resp.iter_lines() if line]
    assert [(e["type"], e["object"]["code"]) for e in events] == [("ERROR", 410)]
