"""CAPI's machine controller as far as a Machine's deletion goes, played against the
management cluster (the stand-in, or a real API server without CAPI) by a test thread.

What it does, as cluster-api internal/controllers/machine reconcileDelete does: it puts
its finalizer on the Machine; once the Machine has a deletionTimestamp it drains the Node
(`Deleting` True `DrainingNode`, `status.deletion.nodeDrainStartTime`), then, while any
annotation with the pre-terminate hook prefix remains, waits (`Deleting` True
`WaitingForPreTerminateHook`, `status.deletion.waitForPreTerminateHookStartTime`, and
the v1beta1 condition `PreTerminateDeleteHookSucceeded` False `WaitingExternalHook`
under `status.deprecated.v1beta1`), then deletes the infrastructure
(`WaitingForInfrastructureDeletion`), says `DeletionCompleted` and takes its finalizer off,
so the Machine is gone; `status.phase` is `Deleting` throughout. The real controller's
sequence, recorded (tests/fixtures/real-capi/), holds it to that:
test_real_capi_deletion.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from tests.integration.kube.conftest import MACHINE, Admin

FINALIZER = "machine.cluster.x-k8s.io"
PRE_TERMINATE = "pre-terminate.delete.hook.machine.cluster.x-k8s.io"
MANAGER = "capi-machine-controller"


class MachineController:
    def __init__(self, admin: Admin, drain: Callable[[], None] = lambda: None,
                 timeout: float = 120.0) -> None:
        self.admin = admin
        self.drain = drain
        """Called while the Node is being drained (the test looks at the node then)."""
        self.timeout = timeout
        self.reasons: list[str] = []
        """The `Deleting` reasons it went through, in order."""
        self.trail: list[tuple[str, bool]] = []
        """Each `Deleting` reason it wrote, with whether a pre-terminate hook was on the
        Machine then (what the real controller's recorded sequence is compared on)."""
        self.hooks: list[str] = []
        """The pre-terminate hooks it waited on."""
        self.error: BaseException | None = None
        self.final: dict[str, Any] = {}
        self._deletion: dict[str, str] = {}
        """The Machine as it was when it went on to delete the infrastructure."""
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.path = (f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{admin.ns}"
                     f"/machines/{MACHINE}")

    def __enter__(self) -> MachineController:
        self.admin.call("PATCH", self.path, {"metadata": {"finalizers": [FINALIZER]}},
                        content_type="application/merge-patch+json")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._thread.join(timeout=10)

    def gone(self) -> bool:
        """Whether it has deleted the Machine (raises what went wrong in its thread)."""
        if self.error is not None:
            raise self.error
        return "Deleted" in self.reasons

    def _run(self) -> None:
        try:
            self._reconcile()
        except BaseException as err:  # reported by gone()
            self.error = err

    def _machine(self) -> dict[str, Any] | None:
        found: dict[str, Any] = self.admin.call("GET", self.path, ok=(200, 404))
        return found if found.get("kind") == "Machine" else None

    def _reconcile(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self._stopped.wait(0.1) and time.monotonic() < deadline:
            machine = self._machine()
            if machine is None or not machine["metadata"].get("deletionTimestamp"):
                continue
            hooks = sorted(k for k in machine["metadata"].get("annotations") or {}
                           if k.startswith(PRE_TERMINATE + "/"))
            if not self.reasons:
                self._deleting("DrainingNode", "Drain not completed yet", hooked=bool(hooks))
                self.drain()
                continue
            if hooks:
                if self.reasons[-1] != "WaitingForPreTerminateHook":
                    self.hooks = [k.split("/", 1)[1] for k in hooks]
                    self._deleting("WaitingForPreTerminateHook",
                                   "Waiting for pre-terminate hooks to succeed (hooks: "
                                   f"{', '.join(self.hooks)})", hook="False", hooked=True)
                continue
            self.final = machine
            self._deleting("WaitingForInfrastructureDeletion", "Deleting infrastructure",
                           hook="True")
            self._deleting("DeletionCompleted", "Deletion completed", hook="True")
            self.admin.call("PATCH", self.path, {"metadata": {"finalizers": None}},
                            content_type="application/merge-patch+json")
            self.reasons.append("Deleted")
            return

    def _deleting(self, reason: str, message: str, hook: str | None = None,
                  hooked: bool = False) -> None:
        """`Deleting` with `reason`; `hook`: the v1beta1 pre-terminate condition's status
        (CAPI sets it once it reaches the pre-terminate hooks)."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        started = {"DrainingNode": "nodeDrainStartTime",
                   "WaitingForPreTerminateHook": "waitForPreTerminateHookStartTime"}
        if reason in started:  # when each wait began (status.deletion)
            self._deletion[started[reason]] = now
        status: dict[str, Any] = {"phase": "Deleting", "conditions": [{
            "type": "Deleting", "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": now}], "deletion": dict(self._deletion)}
        if hook is not None:
            v1beta1: dict[str, Any] = {"type": "PreTerminateDeleteHookSucceeded",
                                       "status": hook, "lastTransitionTime": now}
            if hook == "False":
                v1beta1.update(reason="WaitingExternalHook", severity="Info")
            status["deprecated"] = {"v1beta1": {"conditions": [v1beta1]}}
        self.admin.apply(self.path + "/status", {
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": MACHINE, "namespace": self.admin.ns},
            "status": status}, MANAGER)
        self.reasons.append(reason)
        self.trail.append((reason, hooked))
