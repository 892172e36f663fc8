"""A small garbage collector, in the background as the real one is.

When an object is gone, dependents whose ownerReferences name its uid are deleted
(background propagation; finalizers are honoured, so a dependent with finalizers only
gets its deletionTimestamp). A dependent that still has another existing owner only
loses the dangling reference. An owner deleted with propagationPolicy=Foreground (the
`foregroundDeletion` finalizer) has its dependents deleted first, then loses that
finalizer (and so goes once no other finalizer holds it). Terminating namespaces are
emptied, then removed.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import Callable
from typing import Any

from . import meta as mt
from .calls import FOREGROUND, MERGE, Call
from .objects import Objects
from .status import ApiError
from .store import Subscription

Obj = dict[str, Any]


class GarbageCollector:
    def __init__(self, objects: Objects, poll: float = 0.05) -> None:
        self._objects = objects
        self._poll = poll
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        sub, _, _ = self._objects.store.subscribe(None, None, None)
        self._thread = threading.Thread(target=self._run, args=(sub,), name="sandbox-gc",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self, sub: Subscription) -> None:
        try:
            while not self._stop.is_set():
                try:
                    ev = sub.events.get(timeout=self._poll)
                except queue.Empty:
                    ev = None
                if ev is not None and ev.type == "DELETED":
                    self._collect(ev.obj["metadata"].get("uid", ""))
                self._foreground()
                self._empty_namespaces()
        finally:
            self._objects.store.unsubscribe(sub)

    def _delete(self, res_id: str, namespace: str, name: str) -> None:
        res = self._objects.registry.by_id(res_id)
        # already gone, or raced with another writer: the next event retries
        with contextlib.suppress(ApiError):
            self._objects.delete(Call("delete", res, res.storage_version, namespace, name,
                                      user_agent="kube-controller-manager"), None)

    def _collect(self, uid: str) -> None:
        if not uid:
            return
        store = self._objects.store
        with store.lock:
            # what is alive is decided for every dependent before any of them is changed
            plan = [(res_id, obj, [r for r in obj["metadata"].get("ownerReferences") or []
                                   if store.alive(r.get("uid"))])
                    for res_id, obj in store.dependents(uid)]
            for res_id, obj, remaining in plan:
                meta = obj["metadata"]
                if remaining:
                    meta["ownerReferences"] = remaining
                    store.put(res_id, obj)
                elif not mt.deleting(obj):
                    self._delete(res_id, meta.get("namespace", ""), meta["name"])

    def _foreground(self) -> None:
        store = self._objects.store
        with store.lock:  # one snapshot, as the whole store's copy was
            plan = [(res_id, owner, store.dependents(str(owner["metadata"].get("uid", ""))))
                    for res_id, owner in store.terminating()
                    if FOREGROUND in mt.finalizers(owner)]
        for res_id, owner, dependents in plan:
            for dep_res, dep in dependents:
                if not mt.deleting(dep):
                    self._delete(dep_res, dep["metadata"].get("namespace", ""),
                                 dep["metadata"]["name"])
            if not dependents:
                self._release(res_id, owner)

    def _release(self, res_id: str, owner: Obj) -> None:
        """Remove the foregroundDeletion finalizer, as the collector's PATCH does."""
        res = self._objects.registry.by_id(res_id)
        meta = owner["metadata"]
        rest = [f for f in mt.finalizers(owner) if f != FOREGROUND]
        patch = json.dumps({"metadata": {"finalizers": rest or None,
                                         "resourceVersion": meta["resourceVersion"]}})
        with contextlib.suppress(ApiError):  # changed meanwhile: the next round retries
            self._objects.patch(Call("patch", res, res.storage_version,
                                     meta.get("namespace", ""), meta["name"],
                                     user_agent="kube-controller-manager"),
                                patch.encode(), MERGE)

    def _empty_namespaces(self) -> None:
        store = self._objects.store
        namespaces = sorted(((o["metadata"]["name"], o) for r, o in store.terminating()
                             if r == "/namespaces"), key=lambda pair: pair[0])
        for name, _ in namespaces:
            content = store.select(_in_namespace(name))
            for res_id, obj in content:
                if not mt.deleting(obj):
                    self._delete(res_id, name, obj["metadata"]["name"])
            if not content:
                store.delete("/namespaces", "", name)


def _in_namespace(name: str) -> Callable[[Obj], bool]:
    return lambda obj: bool(obj["metadata"].get("namespace") == name)
