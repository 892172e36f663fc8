"""DeleteOptions in protobuf, as controller-runtime's clients send them: they speak protobuf
for built-in kinds, so a DELETE of a Node or a Secret (Cluster API's Machine deletion, for
one) carries its options in kube's protobuf envelope: the magic "k8s\\0", then a
runtime.Unknown (typeMeta, raw) whose raw is the meta/v1 DeleteOptions message. Other
objects in protobuf stay refused (415), as the package docstring says."""

from __future__ import annotations

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
            raise ValueError(f"wire type {wire} is not used by DeleteOptions")


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise ValueError("a string field holds a number")
    return value.decode()


def _int64(value: int | bytes) -> int:
    if isinstance(value, bytes):
        raise ValueError("a number field holds bytes")
    return value - (1 << 64) if value >= 1 << 63 else value


def delete_options(raw: bytes) -> Obj | None:
    """The DeleteOptions of a protobuf DELETE body as their JSON form; None for none."""
    if not raw:
        return None
    try:
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
