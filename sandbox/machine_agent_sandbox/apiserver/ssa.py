"""Server-side apply and managedFields bookkeeping (after structured-merge-diff).

Every write records who owns which fields. An Update (PUT or a non-apply PATCH) gives the
writer the fields it changed and takes them from everyone else. An Apply merges the
applied configuration into the live object (keyed lists entry by entry), refuses to
change a field another manager owns unless forced (409 FieldManagerConflict), gives the
applier exactly the fields it applied, and removes fields it applied before, omits now,
and nobody else owns.

Simplifications: ownership sets are kept per (manager, operation, subresource) but not
converted between API versions; client-supplied managedFields are honoured only as `[]`
(reset); a status-subresource manager owns only fields under `status`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import fields as fp
from .status import ApiError

Obj = dict[str, Any]
Path = fp.Path


@dataclass
class Entry:
    manager: str
    operation: str  # "Apply" | "Update"
    subresource: str
    api_version: str
    time: str
    paths: set[Path]

    def ident(self) -> tuple[str, str, str]:
        return (self.manager, self.operation, self.subresource)

    def to_json(self) -> Obj:
        out: Obj = {"manager": self.manager, "operation": self.operation,
                    "apiVersion": self.api_version,
                    "fieldsType": "FieldsV1", "fieldsV1": fp.to_fields_v1(self.paths)}
        if self.time:  # an Apply that changed nothing records no time
            out["time"] = self.time
        if self.subresource:
            out["subresource"] = self.subresource
        return out

    def describe(self) -> str:
        """How a conflict names this manager (apimachinery's printManager)."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version} at {self.time}"
        return text


def parse(obj: Obj | None) -> list[Entry]:
    entries = []
    for raw in ((obj or {}).get("metadata") or {}).get("managedFields") or []:
        entries.append(Entry(raw.get("manager", ""), raw.get("operation", "Update"),
                             raw.get("subresource", ""), raw.get("apiVersion", ""),
                             raw.get("time", ""), fp.from_fields_v1(raw.get("fieldsV1") or {})))
    return entries


def dump(entries: list[Entry]) -> list[Obj]:
    """In the real server's order (apimachinery's sortEncodedManagedFields): Apply before
    Update, then by time (to the second, none first), manager, apiVersion, subresource."""
    kept = sorted((e for e in entries if e.paths), key=lambda e: (
        e.operation, e.time, e.manager, e.api_version, e.subresource))
    return [e.to_json() for e in kept]


@dataclass
class Scope:
    """Which part of the object a request may own: main resource or `status`."""

    subresource: str
    has_status: bool

    def select(self, paths: dict[Path, Any]) -> dict[Path, Any]:
        if self.subresource == "status":
            return fp.only(paths, "status", keep=True)
        if self.has_status:
            return fp.only(paths, "status", keep=False)
        return paths

    def owns(self, entry: Entry) -> bool:
        return entry.subresource == self.subresource


def _actor(entries: list[Entry], manager: str, operation: str, scope: Scope,
           api_version: str, now: str) -> Entry:
    for e in entries:
        if e.ident() == (manager, operation, scope.subresource):
            return e
    entry = Entry(manager, operation, scope.subresource, api_version, "", set())
    entries.append(entry)
    return entry


def record_update(entries: list[Entry], old: dict[Path, Any], new: dict[Path, Any],
                  manager: str, scope: Scope, api_version: str, now: str) -> list[Entry]:
    """Ownership after an Update by `manager` that turned `old` into `new` (flattened)."""
    added, removed, modified = fp.compare(scope.select(old), scope.select(new))
    changed = added | modified
    entries = [Entry(e.manager, e.operation, e.subresource, e.api_version, e.time,
                     set(e.paths)) for e in entries]
    actor = _actor(entries, manager, "Update", scope, api_version, now)
    for e in entries:
        if e is not actor:
            e.paths -= changed | removed
    actor.paths = (actor.paths | changed) - removed
    if changed or removed:
        actor.time, actor.api_version = now, api_version
    return [e for e in entries if e.paths]


@dataclass
class Conflict:
    entry: Entry
    path: Path


def conflict_error(conflicts: list[Conflict]) -> ApiError:
    causes = [{"reason": "FieldManagerConflict",
               "message": f"conflict with {c.entry.describe()}",
               "field": fp.path_string(c.path)} for c in conflicts]
    if len(conflicts) == 1:
        c = conflicts[0]
        message = (f"Apply failed with 1 conflict: conflict with {c.entry.describe()}: "
                   f"{fp.path_string(c.path)}")
    else:
        by_manager: dict[str, list[str]] = {}
        for c in conflicts:
            by_manager.setdefault(c.entry.describe(), []).append(fp.path_string(c.path))
        lines = []
        for who in sorted(by_manager):
            lines.append(f"conflicts with {who}:")
            lines.extend(f"- {p}" for p in by_manager[who])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})


@dataclass
class Applied:
    obj: Obj
    entries: list[Entry]


def apply(live: Obj, config: Obj, schema: Obj | None, entries: list[Entry], manager: str,
          scope: Scope, api_version: str, now: str, force: bool) -> Applied:
    """Merge `config` into `live` as `manager`; raises the 409 on conflicts."""
    applied_paths = scope.select(fp.flatten(config, schema))
    merged = fp.merge(live, config, schema)
    old_flat = scope.select(fp.flatten(live, schema))
    added, _, modified = fp.compare(old_flat, scope.select(fp.flatten(merged, schema)))
    changed = (added | modified) & set(applied_paths)
    entries = [Entry(e.manager, e.operation, e.subresource, e.api_version, e.time,
                     set(e.paths)) for e in entries]
    actor = _actor(entries, manager, "Apply", scope, api_version, now)
    conflicts = [Conflict(e, p) for e in entries if e is not actor
                 for p in sorted(e.paths & changed)]
    if conflicts and not force:
        raise conflict_error(conflicts)
    for c in conflicts:
        c.entry.paths.discard(c.path)
    others: set[Path] = set()
    for e in entries:
        if e is not actor:
            others |= e.paths
    stale = actor.paths - set(applied_paths) - others
    for path in sorted(stale, key=len):
        fp.remove(merged, path)
    actor.paths = set(applied_paths)
    if changed or stale:
        actor.time, actor.api_version = now, api_version
    return Applied(merged, [e for e in entries if e.paths])
