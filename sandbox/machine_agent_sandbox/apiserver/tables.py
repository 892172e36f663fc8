"""`Accept: application/json;as=Table;v=v1;g=meta.k8s.io` (kubectl get): a custom
resource's objects as a meta.k8s.io/v1 Table with the CRD's additionalPrinterColumns, as
apiextensions-apiserver's tableconvertor builds it (JSONPath cells, `date` columns as
ages, each row's object as PartialObjectMetadata)."""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

from .resources import ResourceType

Obj = dict[str, Any]

_NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
_DEFAULT_COLUMNS = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
                     "description": "CreationTimestamp is a timestamp representing the server "
                                    "time when this object was created."}]
_STEP = re.compile(r'([^.\[]+)(?:\[\?\(@\.([^=]+)=="([^"]*)"\)\])?')


def wanted(accept: str) -> bool:
    return "as=Table" in accept


def _jsonpath(obj: Any, path: str) -> Any:
    """The subset printer columns use: `.a.b` and `.list[?(@.key=="value")].field`."""
    value = obj
    for step in _STEP.finditer(path.lstrip(".")):
        name, key, match = step.groups()
        value = value.get(name) if isinstance(value, dict) else None
        if key is not None:
            value = next((v for v in value or [] if isinstance(v, dict)
                          and str(v.get(key)) == match), None)
        if value is None:
            return None
    return value


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    whole = round(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = int(seconds // 60)
    if minutes < 10:
        rest = int(seconds) % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = int(seconds // 3600)
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _cell(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "date":
        try:
            then = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
        return human_duration((datetime.datetime.now(datetime.UTC) - then).total_seconds())
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return value


def _columns(res: ResourceType, version: str) -> list[Obj]:
    return res.printer_columns.get(version) or _DEFAULT_COLUMNS


def to_table(res: ResourceType, version: str, body: Obj) -> Obj:
    """A GET or LIST answer (object or list) as a Table."""
    columns = _columns(res, version)
    items = body.get("items", [body])
    rows = []
    for item in items:
        cells = [item["metadata"].get("name")]
        cells += [_cell(_jsonpath(item, c["jsonPath"]), c.get("type", "string"))
                  for c in columns]
        rows.append({"cells": cells, "object": {"kind": "PartialObjectMetadata",
                                                "apiVersion": "meta.k8s.io/v1",
                                                "metadata": item["metadata"]}})
    meta: Obj = {"resourceVersion": (body.get("metadata") or {}).get("resourceVersion", "")}
    if "items" in body and body["metadata"].get("continue"):
        meta["continue"] = body["metadata"]["continue"]
    definitions = [{"name": "Name", "type": "string", "format": "name",
                    "description": _NAME_DESCRIPTION, "priority": 0}]
    definitions += [{"name": c["name"], "type": c.get("type", "string"),
                     "format": c.get("format", ""), "description": c.get("description", ""),
                     "priority": c.get("priority", 0)} for c in columns]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
            "columnDefinitions": definitions, "rows": rows}
