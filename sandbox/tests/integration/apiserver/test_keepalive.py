"""Requests on one keep-alive connection are answered at once (stand-in only)."""

from __future__ import annotations

import time

from machine_agent_sandbox.apiserver import ApiServer

from sandbox.tests.integration.apiserver.kubeclient import CAPI, Kube, machine


def test_answers_are_not_held_for_the_clients_delayed_ack(own_standin: ApiServer,
                                                          admin: Kube, ns: str) -> None:
    # An answer written as headers then body, with Nagle's algorithm on, waits for the
    # client's delayed ACK of the headers: 40 ms per request on Linux, so 20 requests
    # would take 0.8 s at least. Without the hold they take a few ms each.
    admin.check(admin.post(f"{CAPI}/namespaces/{ns}/machines", json=machine()), 201)
    start = time.monotonic()
    for _ in range(20):
        admin.check(admin.get(f"{CAPI}/namespaces/{ns}/machines"), 200)
    assert time.monotonic() - start < 0.5
