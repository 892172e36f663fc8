"""Protobuf bodies, as controller-runtime's clients send them: they speak protobuf for
built-in kinds, in kube's envelope (the magic "k8s\\0", then a runtime.Unknown whose
typeMeta names the kind and whose raw is its message). Decoded: the DeleteOptions of a
DELETE (Cluster API's Machine deletion deletes the Node so), and the objects Cluster API's
providers create in a workload cluster: Secrets (CABPK's bootstrap tokens), ConfigMaps and
RBAC objects (KCP). Any other kind in protobuf stays refused (415)."""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

from . import status as st

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"

Obj = dict[str, Any]


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        i += 1
        if not byte & 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value): varints as int, length-delimited as bytes."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(buf, i)
            if i + size > len(buf):
                raise ValueError("truncated field")
            yield number, buf[i:i + size]
            i += size
        else:
            raise ValueError(f"wire type {wire} is not used by the decoded kinds")


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise ValueError("a string field holds a number")
    return value.decode()


def _int64(value: int | bytes) -> int:
    if isinstance(value, bytes):
        raise ValueError("a number field holds bytes")
    return value - (1 << 64) if value >= 1 << 63 else value


def _envelope(raw: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, message) of kube's protobuf envelope."""
    if not raw.startswith(_MAGIC):
        raise ValueError("no protobuf envelope")
    api_version = kind = ""
    message = b""
    for number, value in _fields(raw[len(_MAGIC):]):
        if number == 1 and isinstance(value, bytes):
            for inner, field in _fields(value):
                if inner == 1:
                    api_version = _text(field)
                elif inner == 2:
                    kind = _text(field)
        elif number == 2 and isinstance(value, bytes):
            message = value
    return api_version, kind, message


def delete_options(raw: bytes) -> Obj | None:
    """The DeleteOptions of a protobuf DELETE body as their JSON form; None for none."""
    if not raw:
        return None
    try:
        api_version, kind, message = _envelope(raw)
        if kind != "DeleteOptions":
            raise ValueError(f"expected DeleteOptions, got {kind or 'no kind'}")
        options: Obj = {"kind": kind, "apiVersion": api_version}
        for number, value in _fields(message):
            if number == 1:
                options["gracePeriodSeconds"] = _int64(value)
            elif number == 2 and isinstance(value, bytes):
                pre: Obj = {}
                for inner, field in _fields(value):
                    pre[{1: "uid", 2: "resourceVersion"}.get(inner, "")] = _text(field)
                pre.pop("", None)
                options["preconditions"] = pre
            elif number == 3:
                options["orphanDependents"] = bool(value)
            elif number == 4:
                options["propagationPolicy"] = _text(value)
            elif number == 5:
                options.setdefault("dryRun", []).append(_text(value))
        return options
    except (ValueError, UnicodeDecodeError) as exc:
        raise st.bad_request(f"unable to decode the protobuf DeleteOptions: {exc}") from None


# The messages of the decoded kinds (k8s.io/api and apimachinery generated.proto): field
# number -> (JSON name, type). A type is a scalar, "map:<value type>", a message name, or
# either with "+" before it for a repeated field; "bool?" is a pointer, kept when sent.
_STR, _META = "string", "ObjectMeta"
_MESSAGES: dict[str, dict[int, tuple[str, str]]] = {
    "ObjectMeta": {1: ("name", _STR), 2: ("generateName", _STR), 3: ("namespace", _STR),
                   4: ("selfLink", _STR), 5: ("uid", _STR), 6: ("resourceVersion", _STR),
                   7: ("generation", "int64"), 8: ("creationTimestamp", "Time"),
                   9: ("deletionTimestamp", "Time"),
                   10: ("deletionGracePeriodSeconds", "int64"), 11: ("labels", "map:string"),
                   12: ("annotations", "map:string"), 13: ("ownerReferences", "+OwnerReference"),
                   14: ("finalizers", "+string"), 17: ("managedFields", "+ManagedFieldsEntry")},
    "OwnerReference": {5: ("apiVersion", _STR), 1: ("kind", _STR), 3: ("name", _STR),
                       4: ("uid", _STR), 6: ("controller", "bool?"),
                       7: ("blockOwnerDeletion", "bool?")},
    "ManagedFieldsEntry": {1: ("manager", _STR), 2: ("operation", _STR),
                           3: ("apiVersion", _STR), 4: ("time", "Time"),
                           6: ("fieldsType", _STR), 7: ("fieldsV1", "FieldsV1"),
                           8: ("subresource", _STR)},
    "Time": {1: ("seconds", "int64"), 2: ("nanos", "int64")},
    "Secret": {1: ("metadata", _META), 2: ("data", "map:bytes"), 3: ("type", _STR),
               4: ("stringData", "map:string"), 5: ("immutable", "bool?")},
    "ConfigMap": {1: ("metadata", _META), 2: ("data", "map:string"),
                  3: ("binaryData", "map:bytes"), 4: ("immutable", "bool?")},
    "Role": {1: ("metadata", _META), 2: ("rules", "+PolicyRule")},
    "ClusterRole": {1: ("metadata", _META), 2: ("rules", "+PolicyRule"),
                    3: ("aggregationRule", "AggregationRule")},
    "RoleBinding": {1: ("metadata", _META), 2: ("subjects", "+Subject"),
                    3: ("roleRef", "RoleRef")},
    "PolicyRule": {1: ("verbs", "+string"), 2: ("apiGroups", "+string"),
                   3: ("resources", "+string"), 4: ("resourceNames", "+string"),
                   5: ("nonResourceURLs", "+string")},
    "AggregationRule": {1: ("clusterRoleSelectors", "+LabelSelector")},
    "LabelSelector": {1: ("matchLabels", "map:string"),
                      2: ("matchExpressions", "+LabelSelectorRequirement")},
    "LabelSelectorRequirement": {1: ("key", _STR), 2: ("operator", _STR),
                                 3: ("values", "+string")},
    "Subject": {1: ("kind", _STR), 2: ("apiGroup", _STR), 3: ("name", _STR),
                4: ("namespace", _STR)},
    "RoleRef": {1: ("apiGroup", _STR), 2: ("kind", _STR), 3: ("name", _STR)},
}
_MESSAGES["ClusterRoleBinding"] = _MESSAGES["RoleBinding"]
DECODED_KINDS = {("v1", "Secret"), ("v1", "ConfigMap"),
                 *(("rbac.authorization.k8s.io/v1", k)
                   for k in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"))}


def _scalar(kind: str, value: int | bytes) -> Any:
    if kind == _STR:
        return _text(value)
    if kind == "bytes":
        if not isinstance(value, bytes):
            raise ValueError("a bytes field holds a number")
        return base64.b64encode(value).decode()
    if kind in ("bool", "bool?"):
        return bool(_int64(value))
    if kind == "int64":
        return _int64(value)
    if kind == "FieldsV1":  # its one field holds the JSON of the field set
        raw = dict(_fields(value if isinstance(value, bytes) else b"")).get(1, b"")
        return json.loads(raw) if isinstance(raw, bytes) and raw else {}
    if kind == "Time":
        if not isinstance(value, bytes):
            raise ValueError("a Time field holds a number")
        seconds = _message("Time", value).get("seconds", 0)
        if not seconds:
            return None  # the zero time: Go's JSON writes null, clients send it so
        return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if not isinstance(value, bytes):
        raise ValueError(f"a {kind} field holds a number")
    return _message(kind, value)


def _message(name: str, buf: bytes) -> Obj:
    """The message as JSON, as Go's encoding/json writes the typed object: empty values
    left out (omitempty), pointers kept when sent."""
    table = _MESSAGES[name]
    out: Obj = {}
    for number, value in _fields(buf):
        if number not in table:
            continue  # a field this table does not name: dropped, as an older server does
        key, kind = table[number]
        if kind.startswith("map:"):
            entry = dict(_fields(value if isinstance(value, bytes) else b""))
            out.setdefault(key, {})[_text(entry.get(1, b""))] = _scalar(kind[4:],
                                                                        entry.get(2, b""))
        elif kind.startswith("+"):
            out.setdefault(key, []).append(_scalar(kind[1:], value))
        else:
            out[key] = _scalar(kind, value)
    pointers = {name for name, kind in table.values() if kind == "bool?"}
    return {k: v for k, v in out.items() if v not in ("", 0, None, False) or k in pointers}


def object_body(raw: bytes) -> Obj | None:
    """The object of a protobuf create or update, as its JSON form; None for a kind this
    module does not decode."""
    try:
        api_version, sent_kind, message = _envelope(raw)
    except ValueError as exc:
        raise st.bad_request(f"unable to decode the protobuf body: {exc}") from None
    if (api_version, sent_kind) not in DECODED_KINDS:
        return None
    try:
        obj = _message(sent_kind, message)
    except (ValueError, UnicodeDecodeError) as exc:
        raise st.bad_request(f"unable to decode the protobuf {sent_kind}: {exc}") from None
    return {"kind": sent_kind, "apiVersion": api_version, **obj}
