"""Structural-schema validation, pruning and defaulting, as kube-apiserver does for custom
resources (the subset the CAPI/IPAM CRDs use).

Checked: type, properties, required, enum, minLength/maxLength, minItems/maxItems,
minProperties/maxProperties, minimum/maximum, pattern, format date-time,
x-kubernetes-list-type map/set (duplicate keys), additionalProperties,
x-kubernetes-preserve-unknown-fields, nullable, x-kubernetes-int-or-string, default.
Not evaluated: x-kubernetes-validations (CEL rules) and formats other than date-time.

Unknown fields are pruned; the caller decides whether the list of pruned paths is an
error (fieldValidation=Strict), a warning (Warn, the default) or ignored. A `null` in a
field that is not nullable is dropped, as the real server does for fields without default.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from . import status as st

Obj = dict[str, Any]

PRESERVE: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
ANY: Obj = {"x-kubernetes-preserve-unknown-fields": True}  # any value, kept as sent

_STR_MAP: Obj = {"type": "object", "additionalProperties": {"type": "string"}}

# ObjectMeta as the server types it (the CRDs only say `metadata: {type: object}`).
OBJECT_META: Obj = {
    "type": "object",
    "properties": {
        "name": {"type": "string"}, "generateName": {"type": "string"},
        "namespace": {"type": "string"}, "selfLink": {"type": "string"},
        "uid": {"type": "string"}, "resourceVersion": {"type": "string"},
        "generation": {"type": "integer"},
        "creationTimestamp": {"type": "string", "nullable": True},
        "deletionTimestamp": {"type": "string", "nullable": True},
        "deletionGracePeriodSeconds": {"type": "integer"},
        "labels": _STR_MAP, "annotations": _STR_MAP,
        "ownerReferences": {
            "type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["uid"],
            # OwnerReference is an atomic struct (+structType=atomic): owned as one field
            "items": {"type": "object", "x-kubernetes-map-type": "atomic",
                      "required": ["apiVersion", "kind", "name", "uid"],
                      "properties": {"apiVersion": {"type": "string"},
                                     "kind": {"type": "string"},
                                     "name": {"type": "string"}, "uid": {"type": "string"},
                                     "controller": {"type": "boolean"},
                                     "blockOwnerDeletion": {"type": "boolean"}}}},
        "finalizers": {"type": "array", "x-kubernetes-list-type": "set",
                       "items": {"type": "string"}},
        "managedFields": {"type": "array", "items": ANY},
    },
}

_DATE_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


@lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def with_meta(schema: Obj | None) -> Obj:
    """The schema of a whole object: the CRD's, or preserve-all, with typed metadata."""
    base = schema if schema is not None else PRESERVE
    props = dict(base.get("properties") or {})
    props["metadata"] = OBJECT_META
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    return {**base, "properties": props}


def child(schema: Obj | None, key: str) -> Obj | None:
    """Schema of `key` inside an object schema; ANY for preserved unknown fields,
    None when the field is unknown (it would be pruned)."""
    if schema is None:
        return ANY
    props = schema.get("properties") or {}
    if key in props:
        return props[key]  # type: ignore[no-any-return]
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        return extra
    if extra is True or schema.get("x-kubernetes-preserve-unknown-fields"):
        return ANY
    return None


def items(schema: Obj | None) -> Obj:
    if schema is None:
        return ANY
    it = schema.get("items")
    return it if isinstance(it, dict) else ANY


def list_type(schema: Obj | None) -> str:
    """'map', 'set' or 'atomic' (the default for CRDs and for schemaless lists)."""
    if schema is None:
        return "atomic"
    return str(schema.get("x-kubernetes-list-type", "atomic"))


def map_keys(schema: Obj | None) -> list[str]:
    return list((schema or {}).get("x-kubernetes-list-map-keys") or [])


def atomic_map(schema: Obj | None) -> bool:
    return schema is not None and schema.get("x-kubernetes-map-type") == "atomic"


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_ok(value: Any, schema: Obj) -> bool:
    want = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        return (isinstance(value, int | str) and not isinstance(value, bool))
    if want is None:
        return True
    actual = _type_name(value)
    if want == "integer":
        return actual == "integer" or (actual == "number" and float(value).is_integer())
    if want == "number":
        return actual in ("integer", "number")
    return bool(actual == want)


@dataclass
class Result:
    value: Any
    errors: list[st.FieldError] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


def check(obj: Obj, schema: Obj | None) -> Result:
    """Validate, prune and default a whole object (metadata included)."""
    res = Result(None)
    res.value = _walk(copy.deepcopy(obj), with_meta(schema), "", res)
    return res


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk(value: Any, schema: Obj, path: str, res: Result) -> Any:
    if not _type_ok(value, schema):
        want = schema.get("type", "string")
        # kube-openapi shows the value's type, not the value
        res.errors.append(st.type_invalid(
            path, _type_name(value), f'{path} in body must be of type {want}: '
            f'"{_type_name(value)}"'))
        return value
    if isinstance(value, dict):
        return _walk_object(value, schema, path, res)
    if isinstance(value, list):
        return _walk_array(value, schema, path, res)
    _check_scalar(value, schema, path, res)
    return value


def _walk_object(value: Obj, schema: Obj, path: str, res: Result) -> Obj:
    props = schema.get("properties") or {}
    out: Obj = {}
    # in key order: the real server's errors come out sorted by field within an object
    for key, sub in sorted(value.items()):
        sub_schema = child(schema, key)
        sub_path = _join(path, key)
        if sub_schema is None:
            res.unknown.append(sub_path)
            continue
        if sub is None and not sub_schema.get("nullable") and "type" in sub_schema:
            continue  # pruned like the real server's PruneNonNullableNullsWithoutDefaults
        out[key] = _walk(sub, sub_schema, sub_path, res)
    for key, sub_schema in props.items():
        if key not in out and "default" in sub_schema:
            out[key] = copy.deepcopy(sub_schema["default"])
    for key in schema.get("required") or []:
        if key not in out:
            res.errors.append(st.required(_join(path, key)))
    n = len(out)
    if "minProperties" in schema and n < schema["minProperties"]:
        res.errors.append(st.invalid(
            path, n, f"{path} in body should have at least {schema['minProperties']} properties"))
    if "maxProperties" in schema and n > schema["maxProperties"]:
        res.errors.append(st.too_many(path, n, schema["maxProperties"]))
    return out


def _walk_array(value: list[Any], schema: Obj, path: str, res: Result) -> list[Any]:
    item_schema = items(schema)
    out = [_walk(v, item_schema, f"{path}[{i}]", res) for i, v in enumerate(value)]
    if "maxItems" in schema and len(out) > schema["maxItems"]:
        res.errors.append(st.too_many(path, len(out), schema["maxItems"]))
    if "minItems" in schema and len(out) < schema["minItems"]:
        res.errors.append(st.invalid(
            path, len(out), f"{path} in body should have at least {schema['minItems']} items"))
    kind = list_type(schema)
    if kind == "map":
        keys = map_keys(schema)
        seen: list[Obj] = []
        for i, v in enumerate(out):
            if not isinstance(v, dict):
                continue
            key = {k: v[k] for k in keys if k in v}
            if key in seen:
                res.errors.append(st.duplicate(f"{path}[{i}]", key))
            seen.append(key)
    elif kind == "set":
        for i, v in enumerate(out):
            if v in out[:i]:
                res.errors.append(st.duplicate(f"{path}[{i}]", v))
    return out


def _check_scalar(value: Any, schema: Obj, path: str, res: Result) -> None:
    if "enum" in schema and value not in schema["enum"]:
        res.errors.append(st.not_supported(path, value, schema["enum"]))
        return
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            res.errors.append(st.too_long(path, schema["maxLength"]))
        if "minLength" in schema and len(value) < schema["minLength"]:
            res.errors.append(st.invalid(
                path, value, f"{path} in body should be at least {schema['minLength']} chars long"))
        pattern = schema.get("pattern")
        if pattern and not _regex(pattern).search(value):
            res.errors.append(st.invalid(path, value, f"{path} in body should match '{pattern}'"))
        if schema.get("format") == "date-time" and not _DATE_TIME.match(value):
            res.errors.append(st.type_invalid(
                path, value, f'{path} in body must be of type date-time: "{value}"'))
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            res.errors.append(st.invalid(
                path, value, f"{path} in body should be greater than or equal to "
                f"{schema['minimum']}"))
        if "maximum" in schema and value > schema["maximum"]:
            res.errors.append(st.invalid(
                path, value, f"{path} in body should be less than or equal to "
                f"{schema['maximum']}"))
