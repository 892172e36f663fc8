"""The one camelCase codec: dataclasses to and from the JSON the journal holds (phase
results, components' sections) and back to the documents the configuration is written
in (`config show`, the reference, a phase's inputs): camelCase keys (or a field's own
`key`), None left out. Reading a record, keys it lacks take their defaults and keys no
longer known are ignored, so a journal written by an earlier version is read as it was
meant (a node upgraded in place); the configuration is decoded strictly, with every
problem named, by agent.config.fields.Decoder."""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")


def loads(text: str | bytes) -> Any:
    """JSON the agent reads back (its journal, status file, a server's answer): anything
    else is a ValueError, JSON nested deeper than the decoder recurses included (a
    RecursionError would be a traceback)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None


SECRET = "***"
"""What a secret field (metadata `secret`) is written as when secrets are redacted."""


class AsText:
    """A value written as its text (`str(value)`), e.g. a duration as `30s`."""


def key_of(f: dataclasses.Field[Any]) -> str:
    """The document key of a field: its metadata `key`, else camelCase of its name."""
    if f.metadata.get("key"):
        return str(f.metadata["key"])
    head, *rest = f.name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def to_json(value: Any, *, redact_secrets: bool = False) -> Any:
    """`value` as plain JSON: dataclasses as mappings with camelCase keys (None left
    out; secret fields as SECRET when `redact_secrets`), enums as their values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {key_of(f): SECRET if redact_secrets and f.metadata.get("secret")
                else to_json(v, redact_secrets=redact_secrets)
                for f in dataclasses.fields(value) if (v := getattr(value, f.name)) is not None}
    if isinstance(value, list | tuple):
        return [to_json(v, redact_secrets=redact_secrets) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v, redact_secrets=redact_secrets) for k, v in value.items()}
    if isinstance(value, AsText):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    return value


def from_json(tp: type[T], value: Any) -> T:
    """`value` read as `tp`, a dataclass whose fields all have defaults."""
    out: T = _read(tp, value if isinstance(value, dict) else {})
    return out


def _read(tp: Any, value: Any) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return None if value is None else _read(inner[0], value)
    if origin is list and isinstance(value, list):
        return [_read(args[0], v) for v in value]
    if origin is dict and isinstance(value, dict):
        return {k: _read(args[1], v) for k, v in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type) and isinstance(value, dict):
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: _read(hints[f.name], value[key_of(f)])
                     for f in dataclasses.fields(tp) if f.init and key_of(f) in value})
    return value
