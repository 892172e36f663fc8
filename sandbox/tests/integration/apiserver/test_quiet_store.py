"""A management cluster is never quiet: its control plane renews leases every couple of
seconds, so a list's own resourceVersion moves while the listed objects do not. Tests
compare items (names and their resourceVersions), never a list's resourceVersion."""

from __future__ import annotations

import time

from sandbox.tests.integration.apiserver.kubeclient import CAPI, Kube, machine, wait_until


def test_a_list_resource_version_moves_while_its_items_stay(admin: Kube, ns: str) -> None:
    admin.check(admin.post(f"{CAPI}/namespaces/{ns}/machines", json=machine("a")), 201)
    first = admin.check(admin.get(f"{CAPI}/namespaces/{ns}/machines"), 200)

    def moved() -> dict[str, object] | None:
        now = admin.check(admin.get(f"{CAPI}/namespaces/{ns}/machines"), 200)
        return now if now["metadata"]["resourceVersion"] != \
            first["metadata"]["resourceVersion"] else None

    started = time.monotonic()
    later = wait_until(moved, timeout=15, every=0.5)
    assert time.monotonic() - started < 15
    assert [(i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in later["items"]] \
        == [(i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in first["items"]]
