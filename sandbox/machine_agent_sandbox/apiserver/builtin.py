"""What some built-in kinds do beyond plain storage: Secret `stringData`, Namespace
phase and termination, CRDs that become served when created, orphaning dependents."""

from __future__ import annotations

import base64
import copy
from typing import TYPE_CHECKING, Any

from . import meta as mt
from .resources import Registry, ResourceType

if TYPE_CHECKING:
    from .store import Store

Obj = dict[str, Any]


def normalize(res: ResourceType, obj: Obj) -> Obj:
    """Rewrites the real server does while decoding. Returns the top-level fields as the
    client sent them where they differ, which field ownership is computed on: a Secret's
    `stringData` is owned as sent, then merged into `data`."""
    sent: Obj = {}
    if res.id == "/secrets":
        if obj.get("stringData"):
            sent = {"stringData": copy.deepcopy(obj["stringData"]),
                    "data": copy.deepcopy(obj.get("data"))}
        string_data = obj.pop("stringData", None) or {}
        data = obj.setdefault("data", {}) if string_data else obj.get("data")
        for key, value in string_data.items():
            assert data is not None
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj.setdefault("type", "Opaque")
    return sent


def on_create(registry: Registry, res: ResourceType, obj: Obj) -> None:
    if res.id == "/namespaces":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
    elif res.id == "apiextensions.k8s.io/customresourcedefinitions":
        registry.add_crd(obj)
        names = (obj.get("spec") or {}).get("names") or {}
        obj["status"] = {
            "acceptedNames": copy.deepcopy(names),
            "storedVersions": [v["name"] for v in obj["spec"].get("versions", [])
                               if v.get("storage")],
            "conditions": [
                {"type": t, "status": "True", "reason": r, "message": m,
                 "lastTransitionTime": mt.now()}
                for t, r, m in (("NamesAccepted", "NoConflicts", "no conflicts found"),
                                ("Established", "InitialNamesAccepted",
                                 "the initial names have been accepted"))]}


def orphan_dependents(store: Store, owner_uid: str) -> None:
    """DELETE with propagationPolicy=Orphan: drop the owner reference from dependents."""
    for res_id, obj in store.all_objects():
        refs = obj["metadata"].get("ownerReferences") or []
        kept = [r for r in refs if r.get("uid") != owner_uid]
        if len(kept) != len(refs):
            if kept:
                obj["metadata"]["ownerReferences"] = kept
            else:
                del obj["metadata"]["ownerReferences"]
            store.put(res_id, obj)


def terminate_namespace(store: Store, ns: Obj) -> Obj:
    """Namespaces go Terminating; the garbage collector empties and removes them."""
    if mt.deleting(ns):
        return ns
    new = copy.deepcopy(ns)
    new["metadata"]["deletionTimestamp"] = mt.now()
    new["metadata"]["deletionGracePeriodSeconds"] = 0
    new.setdefault("status", {})["phase"] = "Terminating"
    return store.put("/namespaces", new)
