"""Dataclasses to and from the JSON the journal holds (phase results, components'
sections): camelCase keys, None left out; reading, keys a record lacks take their
defaults and keys no longer known are ignored, so a journal written by an earlier
version is read as it was meant (a node upgraded in place)."""

from __future__ import annotations

import dataclasses
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


def key_of(f: dataclasses.Field[Any]) -> str:
    head, *rest = f.name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {key_of(f): to_json(v) for f in dataclasses.fields(value)
                if (v := getattr(value, f.name)) is not None}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
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
