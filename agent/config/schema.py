"""The JSON Schema of an AgentConfig document, generated from the model (the dataclasses
and each field's `setting()`, the source of docs/configuration.md too), so editors
(yaml-language-server), CI linting and kubeconform check files as the agent would:

    machine-agent config schema > agentconfig.schema.json

It says the shape: keys (camelCase, unknown ones refused), types, choices, defaults,
each field's documentation, and what the field's check says as bounds, formats and
patterns (agent/config/check_schemas.py: a port's range, a host name's syntax, an address
with its prefix length). What only code can check (a network's host bits, a pool that
exists, fields that exclude each other) stays with `machine-agent config validate`, which
lists every problem with its path.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Sequence
from typing import Any, Literal

from agent.config.check_schemas import constrained
from agent.config.fields import Duration, PhaseName
from agent.config.model import API_VERSION, KIND, AgentConfig
from agent.records import key_of, to_json

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "https://machine-agent.io/schemas/v1alpha1/agentconfig.json"
DURATION = r"^\s*\d+(\.\d+)?\s*(ms|s|m|h)?\s*$"
"""agent.config.fields.Duration's syntax."""


def agent_config_schema(phase_names: Sequence[str]) -> dict[str, Any]:
    """The schema; `phase_names` are the phases installed (agent.phases.registry), which
    the model leaves open (a plugin phase adds its own)."""
    defs: dict[str, Any] = {"PhaseName": {"enum": list(phase_names)}}
    root = _object(AgentConfig, defs)
    # A file may leave out anything with a default; apiVersion and kind are required of
    # every file (agent.config.sources.parse_fragment).
    root["required"] = ["apiVersion", "kind"]
    root["properties"]["apiVersion"] = {"const": API_VERSION,
                                        "description": f"Always {API_VERSION}."}
    root["properties"]["kind"] = {"const": KIND, "description": f"Always {KIND}."}
    return {"$schema": DIALECT, "$id": SCHEMA_ID, "title": "AgentConfig",
            "description": "machine-agent's configuration (docs/configuration.md).",
            **root, "$defs": dict(sorted(defs.items()))}


def _object(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(cls):
        prop = constrained(_type(hints[f.name], defs), f.metadata.get("check"))
        doc = str(f.metadata.get("doc", ""))
        if f.metadata.get("secret"):
            prop = {**prop, "writeOnly": True}
            doc += " Secret: never shown in logs, plans or `config show`."
        if doc:
            prop = {**prop, "description": doc}
        default = _default(f)
        if default is not dataclasses.MISSING:
            prop = {**prop, "default": default}
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(key_of(f))
        properties[key_of(f)] = prop
    out: dict[str, Any] = {"type": "object", "properties": properties,
                           "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def _ref(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    name = cls.__name__
    if name not in defs:
        defs[name] = {}  # taken before the walk: a model may refer to itself
        shape = _object(cls, defs)
        scalar = getattr(cls, "SCALAR_FIELD", None)
        # A plain string stands for the object with just that field set (and checked so).
        if scalar:
            field = next(f for f in dataclasses.fields(cls) if f.name == scalar)
            plain = constrained({"type": "string"}, field.metadata.get("check"))
            defs[name] = {"anyOf": [plain, shape]}
        else:
            defs[name] = shape
    return {"$ref": f"#/$defs/{name}"}


def _type(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = _type(args[0], defs)
        return {"anyOf": [inner, {"type": "null"}]} if len(args) < len(typing.get_args(tp)) \
            else inner
    if origin is Literal:
        return {"enum": list(typing.get_args(tp))}
    if origin is list:
        return {"type": "array", "items": _type(typing.get_args(tp)[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _type(typing.get_args(tp)[1], defs)}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _ref(tp, defs)
    if tp is PhaseName:
        return {"$ref": "#/$defs/PhaseName"}
    if tp is Duration:
        return {"anyOf": [{"type": "number", "minimum": 0},
                          {"type": "string", "pattern": DURATION}],
                "description": "A duration: 250ms, 30s, 5m, 1h or a number of seconds."}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if tp in simple:
        return {"type": simple[tp]}
    return {}  # Any


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.metadata.get("secret"):
        return dataclasses.MISSING
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        if dataclasses.is_dataclass(value):
            return dataclasses.MISSING  # its own fields carry their defaults
    else:
        return dataclasses.MISSING
    return to_json(value, redact_secrets=True)
