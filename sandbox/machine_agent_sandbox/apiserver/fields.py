"""Field paths and field sets, in the `FieldsV1` encoding of managedFields.

A path is a tuple of elements: `f:name` (a struct or map field), `k:{"type":"Ready"}`
(an entry of a `listType=map` list, by its keys), `v:"x"` (a member of a
`listType=set` list). Atomic lists and maps (and every list without a schema) are leaves.
`flatten` maps every leaf path of an object to its value; the entries of keyed lists are
paths of their own (owned as a whole, `"."` in FieldsV1), as structured-merge-diff does.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from . import schema as sch

Obj = dict[str, Any]
Path = tuple[str, ...]

ENTRY = object()  # the value recorded for a keyed-list entry itself
NODE = object()   # a map, struct or list that holds paths of its own (`nodes=True`)

# Fields the server owns; never part of anyone's managed set.
_STRIPPED = {("f:apiVersion",), ("f:kind",)} | {
    ("f:metadata", f"f:{n}") for n in (
        "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
        "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink")}


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def entry_key(item: Obj, keys: list[str]) -> Obj:
    return {k: item[k] for k in keys if k in item}


def flatten(obj: Obj, schema: Obj | None, *, nodes: bool = False) -> dict[Path, Any]:
    """Every leaf path of `obj` with its value. `nodes=True` adds the maps, structs and
    lists that hold them (as NODE): an Update owns a composite it created as a whole
    (`"."` in FieldsV1), an Apply only what it applied."""
    out: dict[Path, Any] = {}
    _flatten(obj, sch.with_meta(schema), (), out)
    for p in list(out):
        stripped = p[:2] in _STRIPPED or p[:1] in _STRIPPED or p == ("f:metadata",)
        if stripped or (out[p] is NODE and not nodes):
            del out[p]
    return out


def _flatten(value: Any, schema: Obj | None, prefix: Path, out: dict[Path, Any]) -> None:
    if prefix and isinstance(value, dict | list) and value and not (
            isinstance(value, dict) and sch.atomic_map(schema)) and not (
            isinstance(value, list) and sch.list_type(schema) not in ("map", "set")):
        out[prefix] = NODE
    if isinstance(value, dict) and not sch.atomic_map(schema):
        if not value and prefix:
            out[prefix] = {}
        for k, v in value.items():
            sub = sch.child(schema, k)
            _flatten(v, sub if sub is not None else sch.ANY, (*prefix, f"f:{k}"), out)
        return
    if isinstance(value, list) and value and sch.list_type(schema) == "map":
        keys = sch.map_keys(schema)
        item_schema = sch.items(schema)
        for item in value:
            if not isinstance(item, dict):
                out[prefix] = value
                return
            p = (*prefix, "k:" + _compact(entry_key(item, keys)))
            if sch.atomic_map(item_schema):  # owned whole, as one field
                out[p] = item
                continue
            out[p] = ENTRY
            for k, v in item.items():
                sub = sch.child(item_schema, k)
                _flatten(v, sub if sub is not None else sch.ANY, (*p, f"f:{k}"), out)
        return
    if isinstance(value, list) and value and sch.list_type(schema) == "set":
        for item in value:
            out[(*prefix, "v:" + _compact(item))] = item
        return
    out[prefix] = value


def only(paths: dict[Path, Any], top: str, keep: bool) -> dict[Path, Any]:
    """Paths under `f:<top>` (keep=True) or all others (keep=False)."""
    return {p: v for p, v in paths.items() if (p[:1] == (f"f:{top}",)) == keep}


def compare(old: dict[Path, Any], new: dict[Path, Any]) -> tuple[set[Path], set[Path],
                                                                 set[Path]]:
    """(added, removed, modified) leaf paths from `old` to `new`."""
    added = set(new) - set(old)
    removed = set(old) - set(new)
    modified = {p for p in set(old) & set(new)
                if not (old[p] is new[p] and old[p] in (ENTRY, NODE)) and old[p] != new[p]
                and not _same_container(old[p], new[p])}
    return added, removed, modified


def _same_container(a: Any, b: Any) -> bool:
    """An empty map that gained fields (or lost them all) is not itself a change."""
    return (a is NODE and b == {}) or (a == {} and b is NODE)


# --- FieldsV1 ------------------------------------------------------------------------


def to_fields_v1(paths: set[Path]) -> Obj:
    root: Obj = {}
    members: list[Obj] = []
    for path in sorted(paths):
        node = root
        for el in path:
            node = node.setdefault(el, {})
        members.append(node)
    for node in members:
        if node:
            children = dict(node)
            node.clear()
            node["."] = {}
            node.update(children)
    return root


def from_fields_v1(tree: Obj) -> set[Path]:
    out: set[Path] = set()

    def walk(node: Obj, prefix: Path) -> None:
        if not node and prefix:
            out.add(prefix)
        for key, sub in node.items():
            if key == ".":
                out.add(prefix)
            else:
                walk(sub if isinstance(sub, dict) else {}, (*prefix, key))

    walk(tree, ())
    return out


def path_string(path: Path) -> str:
    """structured-merge-diff's rendering: `.status.conditions[type="Ready"].status`."""
    parts = []
    for el in path:
        kind, _, rest = el.partition(":")
        if kind == "f":
            parts.append(f".{rest}")
        elif kind == "k":
            key = json.loads(rest)
            parts.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in key.items()) + "]")
        elif kind == "v":
            parts.append(f"[={rest}]")
        else:
            parts.append(f"[{rest}]")
    return "".join(parts)


# --- editing objects by path -----------------------------------------------------------


def _find(container: Any, el: str) -> tuple[Any, Any] | None:
    """(holder, index-or-key) of element `el` inside `container`, or None."""
    kind, _, rest = el.partition(":")
    if kind == "f" and isinstance(container, dict) and rest in container:
        return container, rest
    if kind == "k" and isinstance(container, list):
        key = json.loads(rest)
        for i, item in enumerate(container):
            if isinstance(item, dict) and all(item.get(k) == v for k, v in key.items()):
                return container, i
    if kind == "v" and isinstance(container, list):
        value = json.loads(rest)
        for i, item in enumerate(container):
            if item == value:
                return container, i
    return None


def remove(obj: Obj, path: Path) -> None:
    node: Any = obj
    for el in path[:-1]:
        found = _find(node, el)
        if found is None:
            return
        holder, idx = found
        node = holder[idx]
    found = _find(node, path[-1])
    if found is not None:
        holder, idx = found
        del holder[idx]


def merge(live: Any, config: Any, schema: Obj | None) -> Any:
    """Server-side apply's merge of an applied configuration into the live object."""
    if isinstance(config, dict) and isinstance(live, dict) and not sch.atomic_map(schema):
        out = copy.deepcopy(live)
        for k, v in config.items():
            sub = sch.child(schema, k)
            out[k] = merge(live.get(k), v, sub if sub is not None else sch.ANY)
        return out
    if isinstance(config, list) and isinstance(live, list):
        kind = sch.list_type(schema)
        if kind == "map":
            keys = sch.map_keys(schema)
            out_list = copy.deepcopy(live)
            for item in config:
                if not isinstance(item, dict):
                    return copy.deepcopy(config)
                key = entry_key(item, keys)
                idx = next((i for i, cur in enumerate(out_list) if isinstance(cur, dict)
                            and entry_key(cur, keys) == key), None)
                if idx is None:
                    out_list.append(copy.deepcopy(item))
                else:
                    out_list[idx] = merge(out_list[idx], item, sch.items(schema))
            return out_list
        if kind == "set":
            return copy.deepcopy(live) + [copy.deepcopy(v) for v in config if v not in live]
    return copy.deepcopy(config)
