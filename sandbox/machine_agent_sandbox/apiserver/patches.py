"""JSON merge patch (RFC 7386: lists are replaced whole) and JSON patch (RFC 6902)."""

from __future__ import annotations

import copy
from typing import Any

from .status import ApiError


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _invalid(message: str) -> ApiError:
    # the real server wraps JSON patch failures as a 422 with the library's message
    return ApiError(422, "Invalid", message)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _invalid(f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise _invalid(f"doc is missing path: \"{path}\": missing value")
    return node


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise _invalid(f"doc is missing path: \"{path}\": missing value")


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise _invalid(f"doc is missing path: \"{path}\": missing value")


def _add(doc: Any, path: str, value: Any, replace: bool) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise _invalid(f"replace operation does not apply: doc is missing key: {path}: "
                           "missing value")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise _invalid(f"add operation does not apply: doc is missing path: \"{path}\": "
                           "missing value")
    else:
        raise _invalid(f"doc is missing path: \"{path}\": missing value")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "json: cannot unmarshal object into Go value of "
                       "type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise _invalid("Unexpected kind: an operation needs 'op' and 'path'")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")), replace=False)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op.get("value")), replace=True)
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise _invalid(f"testing value {path} failed: test failed")
        elif kind in ("move", "copy"):
            value = _remove(doc, op["from"]) if kind == "move" else copy.deepcopy(
                _get(doc, op["from"]))
            doc = _add(doc, path, value, replace=False)
        else:
            raise _invalid(f"Unexpected kind: {kind}")
    return doc
