"""Leader-election leases renewed in the background, as every real control plane does:
kube-controller-manager and kube-scheduler renew theirs in kube-system, each apiserver its
identity lease, every few seconds. So the store's resourceVersion, and with it a list's
own resourceVersion, moves while nothing a test wrote changes, as on a real cluster;
a test that compares a list's resourceVersion across time fails here as it would there.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import threading

from .calls import Call
from .objects import Objects
from .status import ApiError

HOLDERS = ("kube-controller-manager", "kube-scheduler")


class LeaseRenewer:
    def __init__(self, objects: Objects, interval: float) -> None:
        self._objects = objects
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sandbox-leases", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            for holder in HOLDERS:
                self._renew(holder)

    def _renew(self, holder: str) -> None:
        res = self._objects.registry.by_id("coordination.k8s.io/leases")
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": holder, "namespace": "kube-system"},
                "spec": {"holderIdentity": f"{holder}_sandbox", "leaseDurationSeconds": 15,
                         "renewTime": now}}
        call = Call("patch", res, "v1", "kube-system", holder,
                    query={"fieldManager": holder, "force": "true"}, user_agent=holder)
        with contextlib.suppress(ApiError):  # stopping, or raced: the next round renews
            self._objects.patch(call, json.dumps(body).encode(), "application/apply-patch+yaml")
