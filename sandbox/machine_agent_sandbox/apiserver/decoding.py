"""Request bodies decoded as kube-apiserver decodes them: by Content-Type (JSON or YAML
for objects; 415 for anything else), with Go's encoding/json error wording, which
clients and the corpus see in Status messages."""

from __future__ import annotations

import json
from typing import Any

import yaml

from . import protobuf
from . import status as st

OBJECT_MEDIA_TYPES = ["application/json", "application/yaml",
                      "application/vnd.kubernetes.protobuf"]


def go_json_error(exc: json.JSONDecodeError) -> str:
    """What Go's encoding/json says where Python's json module failed."""
    doc, pos = exc.doc, exc.pos
    if pos >= len(doc.rstrip()):
        return "unexpected end of JSON input"
    char = doc[pos]
    context = {
        "Expecting property name enclosed in double quotes": "looking for beginning of "
                                                             "object key string",
        "Expecting value": "looking for beginning of value",
        "Expecting ':' delimiter": "after object key",
        "Expecting ',' delimiter": "after object key:value pair",
        "Extra data": "after top-level value",
    }.get(exc.msg, "looking for beginning of value")
    return f"invalid character {char!r} {context}"


_FAST_LOADER = getattr(yaml, "CSafeLoader", None)


def load_yaml(raw: bytes) -> Any:
    """yaml.safe_load, through libyaml's parser where PyYAML has it: an apply patch
    parsed by the pure-Python parser was a tenth of the stand-in's time under a fleet's
    load. Both build the document with the same constructor and resolver, so a valid
    document reads the same; an invalid one is parsed again by the pure-Python parser,
    so the error (which the answer quotes) is worded as before."""
    if _FAST_LOADER is not None:
        try:
            return yaml.load(raw, Loader=_FAST_LOADER)
        except Exception:  # whatever failed, the pure-Python parser answers as before
            pass
    return yaml.safe_load(raw)


def _excerpt(raw: bytes) -> str:
    text = raw.decode(errors="replace")
    return text if len(text) <= 30 else text[:30] + " ..."


def object_body(raw: bytes, content_type: str, kind: str) -> Any:
    """The object of a create or update (None for an empty body)."""
    media = (content_type or "application/json").split(";")[0].strip().lower()
    if not raw.strip():
        return None
    if media == "application/json":
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise st.bad_request(
                f"the object provided is unrecognized (must be of type {kind}): couldn't get "
                f"version/kind; json parse error: {go_json_error(exc)} ({_excerpt(raw)})"
            ) from None
    if media == "application/yaml":
        try:
            return load_yaml(raw)
        except yaml.YAMLError as exc:
            raise st.bad_request(f"error converting YAML to JSON: {exc}") from None
    if media == protobuf.MEDIA_TYPE and (decoded := protobuf.object_body(raw)) is not None:
        return decoded
    raise st.unsupported_media_type(media, OBJECT_MEDIA_TYPES)


def patch_document(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except json.JSONDecodeError as exc:
        raise st.bad_request(f"error decoding patch: {go_json_error(exc)}") from None
