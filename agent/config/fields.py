"""Decoding documents into typed dataclasses, collecting every error with its path.

Models are plain dataclasses; `setting()` attaches the documentation, the validity check
and whether a value is secret. `decode()` walks the type hints, so the model is the one
source of truth for validation, `config show` and the generated reference.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, NewType, TypeVar

from agent.errors import SHOWN, FieldError, shown
from agent.logs import REDACT
from agent.records import AsText, key_of

T = TypeVar("T")

Check = Callable[[Any], str | None]
"""A validity check: returns what is wrong (with its fix), or None."""

_MISSING = dataclasses.MISSING

PhaseName = NewType("PhaseName", str)
"""A phase's name. Which names exist is the phase registry's (agent/phases/registry.py),
above the configuration: it checks them once the configuration is loaded."""

Problem = tuple[str, str, str | None]
"""What a check above the model finds: (path, what is wrong, the fix or None)."""


class Duration(AsText, float):
    """Seconds; written as `250ms`, `30s`, `5m`, `1h` or a plain number of seconds."""

    _UNITS: typing.ClassVar[dict[str, float]] = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    _RE: typing.ClassVar[re.Pattern[str]] = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")

    @classmethod
    def parse(cls, value: Any) -> Duration:
        if isinstance(value, bool):
            raise ValueError("expected a duration such as 30s, got a boolean")
        if isinstance(value, int | float):
            if value < 0:
                raise ValueError("a duration cannot be negative")
            return cls(value)
        if isinstance(value, str) and (m := cls._RE.match(value)):
            return cls(float(m.group(1)) * cls._UNITS[m.group(2) or "s"])
        raise ValueError(f"{shown(value)} is not a duration (use e.g. 250ms, 30s, 5m, 1h)")

    def __str__(self) -> str:
        seconds = float(self)
        if seconds and seconds < 1:
            return f"{seconds * 1000:g}ms"
        for unit, size in (("h", 3600), ("m", 60)):
            if seconds >= size and seconds % size == 0:
                return f"{seconds / size:g}{unit}"
        return f"{seconds:g}s"


def setting(
    doc: str,
    *,
    default: Any = _MISSING,
    factory: Callable[[], Any] | None = None,
    check: Check | None = None,
    secret: bool = False,
    key: str | None = None,
) -> Any:
    """A model field: its documentation, default, check, and whether it is a secret."""
    meta = {"doc": doc, "check": check, "secret": secret, "key": key}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def join_path(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class Decoder:
    """Decodes one document; `errors` collects every problem found."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def fail(self, path: str, message: str, hint: str | None = None) -> None:
        self.errors.append(FieldError(path or "(document)", message, hint))

    def decode(self, tp: Any, value: Any, path: str) -> Any:
        """The value decoded as `tp`, or `_MISSING` after recording why it is not."""
        tp = getattr(tp, "__supertype__", tp)  # a NewType decodes as what it wraps
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if value is None:
                return None
            return self.decode(args[0], value, path)
        if origin is Literal:
            choices = typing.get_args(tp)
            if value in choices:
                return value
            self.fail(path, f"{shown(value)} is not one of: {', '.join(map(str, choices))}")
            return _MISSING
        if origin is list:
            if not isinstance(value, list):
                self.fail(path, f"expected a list, got {_kind(value)}")
                return _MISSING
            (item_tp,) = typing.get_args(tp)
            items = [self.decode(item_tp, v, join_path(path, i)) for i, v in enumerate(value)]
            return _MISSING if any(i is _MISSING for i in items) else items
        if origin is dict:
            if not isinstance(value, dict):
                self.fail(path, f"expected a mapping, got {_kind(value)}")
                return _MISSING
            _, value_tp = typing.get_args(tp)
            out = {}
            for k, v in value.items():
                if not isinstance(k, str):
                    self.fail(path, f"key {shown(k)} is not a string")
                    continue
                out[k] = self.decode(value_tp, v, join_path(path, k))
            return _MISSING if any(v is _MISSING for v in out.values()) else out
        if dataclasses.is_dataclass(tp):
            return self.decode_object(typing.cast(type, tp), value, path)
        return self._decode_scalar(tp, value, path)

    def _decode_scalar(self, tp: Any, value: Any, path: str) -> Any:
        if tp is Any:
            return value
        if tp is Duration:
            try:
                return Duration.parse(value)
            except ValueError as err:
                self.fail(path, str(err))
                return _MISSING
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            try:
                return tp(value)
            except ValueError:
                names = ", ".join(str(m.value) for m in tp)
                self.fail(path, f"{shown(value)} is not one of: {names}")
                return _MISSING
        if tp is bool and isinstance(value, bool):
            return value
        if tp is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if tp is str and isinstance(value, str):
            return value
        hint = "quote it to make it a string" if tp is str and value is not None else None
        self.fail(path, f"expected {_NAMES.get(tp, str(tp))}, got {_kind(value)}", hint)
        return _MISSING

    def decode_object(self, cls: type[T], value: Any, path: str) -> T | Any:
        scalar_key = getattr(cls, "SCALAR_FIELD", None)
        if scalar_key is not None and isinstance(value, str):
            value = {scalar_key: value}
        if not isinstance(value, dict):
            self.fail(path, f"expected a mapping, got {_kind(value)}")
            return _MISSING
        start = len(self.errors)
        prepare = getattr(cls, "prepare_document", None)
        renamed: Callable[[str], str | None] | None = None
        if prepare is not None:
            # a model that reads another format (network-config v2) translates it into
            # its own fields here, and names its errors by the original's paths
            value, renamed, problems = prepare(value)
            for sub, message, hint in problems:
                self.fail(join_path(path, sub), message, hint)
            start = len(self.errors)
        obj = self._decode_fields(cls, value, path)
        if renamed is not None:
            self.errors[start:] = [_renamed(e, path, renamed) for e in self.errors[start:]]
        return obj

    def _decode_fields(self, cls: type[T], value: dict[str, Any], path: str) -> T | Any:
        fields = {key_of(f): f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        hints = _type_hints(typing.cast(type, cls))
        for key in value:
            if key not in fields:
                import difflib  # lazy: only for a misspelt key

                name = str(key)
                # difflib is quadratic in the length: a hostile key can be megabytes
                close = (difflib.get_close_matches(name, list(fields), n=1, cutoff=0.6)
                         if len(name) <= SHOWN else [])
                self.fail(join_path(path, name if len(name) <= SHOWN else shown(name)),
                          "unknown field",
                          f"did you mean {close[0]!r}?" if close else
                          f"known fields: {', '.join(sorted(fields))}")
        kwargs: dict[str, Any] = {}
        failed = False
        for key, f in fields.items():
            where = join_path(path, key)
            if key in value:
                decoded = self.decode(hints[f.name], value[key], where)
                if decoded is not _MISSING and decoded is not None:
                    decoded = self._checked(f, decoded, where)
            elif f.default is _MISSING and f.default_factory is _MISSING:
                self.fail(where, "is required")
                decoded = _MISSING
            else:
                continue
            if decoded is _MISSING:
                failed = True
            else:
                kwargs[f.name] = decoded
        if failed:
            return _MISSING
        obj = cls(**kwargs)
        validate = getattr(obj, "validate", None)
        if validate is not None:
            for sub, message, hint in validate():
                self.fail(join_path(path, sub) if sub else path, message, hint)
        return obj

    def _checked(self, f: dataclasses.Field[Any], value: Any, where: str) -> Any:
        if f.metadata.get("secret") and isinstance(value, str):
            REDACT.add(value)
        check: Check | None = f.metadata.get("check")
        if check is None:
            return value
        items = value if isinstance(value, list) else [value]
        bad = False
        for i, item in enumerate(items):
            problem = check(item)
            if problem:
                self.fail(join_path(where, i) if isinstance(value, list) else where, problem)
                bad = True
        return _MISSING if bad else value


def _renamed(error: FieldError, path: str, renamed: Callable[[str], str | None]
             ) -> FieldError:
    prefix = path + "." if path else ""
    if not error.path.startswith(prefix):
        return error
    original = renamed(error.path[len(prefix):])
    if original is None:
        return error
    return dataclasses.replace(error, path=prefix + original)


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    # Resolving string annotations is the slowest step of decoding; models never change.
    return typing.get_type_hints(cls)


_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
