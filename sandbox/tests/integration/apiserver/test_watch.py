"""WATCH: events, compaction (410 Expired), bookmarks, selectors, timeouts."""

from __future__ import annotations

import threading
import time
from typing import Any

from machine_agent_sandbox.apiserver import ApiServer

from sandbox.tests.integration.apiserver.kubeclient import CAPI, Kube, machine

Obj = dict[str, Any]


def _machines(ns: str) -> str:
    return f"{CAPI}/namespaces/{ns}/machines"


def _later(delay: float, action: Any) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(delay), action()), daemon=True)
    t.start()
    return t


def test_a_watch_streams_added_modified_and_deleted(admin: Kube, ns: str) -> None:
    admin.check(admin.post(_machines(ns), json=machine("a")), 201)

    def changes() -> None:
        admin.check(admin.patch(f"{_machines(ns)}/a", {"metadata": {"labels": {"x": "1"}}}),
                    200)
        admin.check(admin.delete(f"{_machines(ns)}/a"), 200)

    t = _later(0.3, changes)
    events = []
    for ev in admin.watch(_machines(ns), {"timeoutSeconds": "3"}):
        events.append((ev["type"], ev["object"]["metadata"]["name"]))
        assert ev["object"]["apiVersion"] == "cluster.x-k8s.io/v1beta2"
        if ev["type"] == "DELETED":
            break
    t.join(timeout=5)
    assert events == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_a_watch_from_a_resource_version_sends_only_later_events(admin: Kube, ns: str) -> None:
    rv = admin.check(admin.post(_machines(ns), json=machine("a")), 201)[
        "metadata"]["resourceVersion"]
    admin.check(admin.post(_machines(ns), json=machine("b")), 201)
    ev = next(admin.watch(_machines(ns), {"resourceVersion": rv, "timeoutSeconds": "2"}))
    assert (ev["type"], ev["object"]["metadata"]["name"]) == ("ADDED", "b")


def test_a_watch_from_a_compacted_version_gets_an_expired_error_event(
        own_standin: ApiServer, admin: Kube, ns: str) -> None:
    rv = admin.check(admin.post(_machines(ns), json=machine("a")), 201)[
        "metadata"]["resourceVersion"]
    admin.check(admin.post(_machines(ns), json=machine("b")), 201)
    own_standin.compact()
    events = list(admin.watch(_machines(ns), {"resourceVersion": rv, "timeoutSeconds": "2"}))
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")


def test_an_exact_list_from_a_compacted_version_is_410(own_standin: ApiServer, admin: Kube,
                                                      ns: str) -> None:
    """As on the real server (corpus case m): Exact and paginated reads are of that
    revision and expire; NotOlderThan (the default) is served from the cache."""
    rv = admin.check(admin.post(_machines(ns), json=machine("a")), 201)[
        "metadata"]["resourceVersion"]
    admin.check(admin.post(_machines(ns), json=machine("b")), 201)
    own_standin.compact()
    for params in ({"resourceVersion": rv, "resourceVersionMatch": "Exact"},
                   {"resourceVersion": rv, "limit": "1"}):
        reply = admin.check(admin.get(_machines(ns), params=params), 410)
        assert reply["reason"] == "Expired"
    listed = admin.check(admin.get(_machines(ns), params={"resourceVersion": rv}), 200)
    assert [m["metadata"]["name"] for m in listed["items"]] == ["a", "b"]


def test_history_is_bounded(tmp_path: Any) -> None:
    with ApiServer(tmp_path / "small", history_size=3, ipam=False) as api:
        admin = Kube(api.url, str(api.ca_path), token=api.admin_token)
        first = admin.check(admin.post("/api/v1/namespaces/default/configmaps", json={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c0"}}), 201)
        for i in range(1, 6):
            admin.check(admin.post("/api/v1/namespaces/default/configmaps", json={
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}}), 201)
        events = list(admin.watch("/api/v1/namespaces/default/configmaps", {
            "resourceVersion": first["metadata"]["resourceVersion"], "timeoutSeconds": "1"}))
        assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410


def test_bookmarks_come_only_when_the_watched_type_has_a_newer_version(
        admin: Kube, ns: str) -> None:
    """As the real watch cache (corpus case l): a bookmark 2 s before the deadline, only
    when an object of the watched type changed since what the watcher was sent, even
    one its selector filters out; a change to another type does not count."""
    body = machine("a")
    body["metadata"]["labels"] = {"role": "worker"}
    admin.check(admin.post(_machines(ns), json=machine("unlabelled")), 201)
    rv = admin.check(admin.post(_machines(ns), json=body), 201)["metadata"]["resourceVersion"]
    params = {"resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "3",
              "labelSelector": "role"}
    events = list(admin.watch(_machines(ns), params))
    assert [e["type"] for e in events] == []  # nothing newer than rv
    t = _later(0.3, lambda: admin.post(f"/api/v1/namespaces/{ns}/configmaps", json={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "elsewhere"}}))
    events = list(admin.watch(_machines(ns), params))
    t.join(timeout=5)
    assert [e["type"] for e in events] == []
    t = _later(0.3, lambda: admin.patch(f"{_machines(ns)}/unlabelled",
                                        {"metadata": {"annotations": {"touched": "yes"}}}))
    events = list(admin.watch(_machines(ns), params))
    t.join(timeout=5)
    assert [e["type"] for e in events] == ["BOOKMARK"]
    assert int(events[0]["object"]["metadata"]["resourceVersion"]) > int(rv)


def test_an_object_that_stops_matching_the_selector_is_sent_as_deleted(
        admin: Kube, ns: str) -> None:
    body = machine("a")
    body["metadata"]["labels"] = {"role": "worker"}
    admin.check(admin.post(_machines(ns), json=body), 201)
    t = _later(0.3, lambda: admin.patch(f"{_machines(ns)}/a",
                                        {"metadata": {"labels": {"role": "cp"}}}))
    events = []
    for ev in admin.watch(_machines(ns), {"labelSelector": "role=worker",
                                          "timeoutSeconds": "3"}):
        events.append(ev["type"])
        if ev["type"] == "DELETED":
            break
    t.join(timeout=5)
    assert events == ["ADDED", "DELETED"]


def test_timeout_seconds_ends_the_stream(admin: Kube, ns: str) -> None:
    start = time.monotonic()
    assert list(admin.watch(_machines(ns), {"timeoutSeconds": "1"})) == []
    assert time.monotonic() - start < 5
