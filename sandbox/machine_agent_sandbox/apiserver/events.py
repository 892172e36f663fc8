"""Events: one stored kind, two APIs. kube-apiserver keeps every Event as a core/v1 Event;
events.k8s.io/v1 is a view of the same objects with renamed fields (regarding for
involvedObject, note for message, deprecated* for the legacy fields), so an Event written
through either API is read through both. Writes through events.k8s.io/v1 are validated
strictly (ValidateEventCreate: eventTime required, type Normal or Warning, legacy fields
unset); core/v1 writes only loosely, as on the real server.

managedFields stay in the shape of the API they were written through (the real server
keeps each entry's apiVersion), so they are computed on that view.
"""

from __future__ import annotations

from typing import Any

from . import status as st

Obj = dict[str, Any]

GROUP = "events.k8s.io"
STORAGE_ID = "/events"

# events.k8s.io/v1 field -> core/v1 field
_TO_CORE = {"regarding": "involvedObject", "note": "message",
            "reportingController": "reportingComponent", "deprecatedSource": "source",
            "deprecatedFirstTimestamp": "firstTimestamp",
            "deprecatedLastTimestamp": "lastTimestamp", "deprecatedCount": "count"}
_TO_EVENTS = {core: new for new, core in _TO_CORE.items()}

_OBJECT_REF: Obj = {"type": "object", "x-kubernetes-map-type": "atomic",
                    "x-kubernetes-preserve-unknown-fields": True}
# Just enough schema for managedFields: object references are atomic structs.
CORE_SCHEMA: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"involvedObject": _OBJECT_REF, "related": _OBJECT_REF}}
EVENTS_SCHEMA: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                      "properties": {"regarding": _OBJECT_REF, "related": _OBJECT_REF}}


def is_events_api(group: str, plural: str) -> bool:
    return group == GROUP and plural == "events"


def to_core(obj: Obj) -> Obj:
    """An events.k8s.io/v1 Event as stored (core/v1)."""
    out: Obj = {}
    for key, value in obj.items():
        if key in ("deprecatedFirstTimestamp", "deprecatedLastTimestamp", "eventTime") \
                and value is None:
            continue
        if key == "deprecatedSource" and value == {}:
            continue
        out[_TO_CORE.get(key, key)] = value
    out["apiVersion"], out["kind"] = "v1", "Event"
    return out


def core_view(obj: Obj) -> Obj:
    """A stored Event as core/v1 answers it (Go's zero values shown as it encodes them)."""
    out = dict(obj)
    out.setdefault("involvedObject", {})
    out.setdefault("source", {})
    for key in ("firstTimestamp", "lastTimestamp", "eventTime"):
        out.setdefault(key, None)
    return out


def events_view(obj: Obj) -> Obj:
    """A stored Event as events.k8s.io/v1 answers it."""
    out: Obj = {}
    for key, value in obj.items():
        out[_TO_EVENTS.get(key, key)] = value
    out.setdefault("regarding", {})
    out.setdefault("deprecatedSource", {})
    for key in ("deprecatedFirstTimestamp", "deprecatedLastTimestamp", "eventTime"):
        out.setdefault(key, None)
    return out


def validate_create(obj: Obj) -> list[st.FieldError]:
    """k8s.io/kubernetes pkg/apis/core/validation ValidateEventCreate for events.k8s.io/v1."""
    errors: list[st.FieldError] = []
    if not obj.get("eventTime"):
        errors.append(st.required("eventTime"))
    if obj.get("type") not in ("Normal", "Warning"):
        errors.append(st.FieldError("FieldValueInvalid", "type",
                                    f'Invalid value: "": has invalid value: {obj.get("type", "")}'))
    for key in ("deprecatedFirstTimestamp", "deprecatedLastTimestamp"):
        if obj.get(key):
            errors.append(st.invalid(key, "", "needs to be unset"))
    if obj.get("deprecatedCount"):
        errors.append(st.invalid("deprecatedCount", "", "needs to be unset"))
    if obj.get("deprecatedSource"):
        errors.append(st.invalid("deprecatedSource", "", "needs to be unset"))
    if len(str(obj.get("note", "")).encode()) > 1024:
        errors.append(st.too_long("note", 1024))
    return errors
