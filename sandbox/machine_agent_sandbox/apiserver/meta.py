"""Object metadata rules: timestamps, names, resourceVersion parsing, generation."""

from __future__ import annotations

import datetime
import re
import secrets
from typing import Any

from . import status as st

Obj = dict[str, Any]

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"

# kinds whose names are RFC 1123 labels rather than subdomains
_LABEL_NAMED = {"namespaces", "services"}


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def generate_name(prefix: str) -> str:
    return prefix + "".join(secrets.choice(_NAME_CHARS) for _ in range(5))


_PATH_SEGMENT_NAMED = {"roles", "clusterroles", "rolebindings", "clusterrolebindings"}


def name_errors(plural: str, name: str, path: str = "metadata.name") -> list[st.FieldError]:
    if not name:
        return [st.FieldError("FieldValueRequired", path,
                              "Required value: name or generateName is required")]
    if plural in _PATH_SEGMENT_NAMED:
        # RBAC names are path segments (apimachinery validation/path), so "kubeadm:x" is one
        if name in (".", ".."):
            return [st.invalid(path, name, f"may not be '{name}'")]
        return [st.invalid(path, name, f"may not contain '{c}'") for c in "/%" if c in name]
    if plural in _LABEL_NAMED:
        if len(name) > 63 or not _LABEL.match(name):
            return [st.invalid(path, name, (
                "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                "characters or '-', and must start and end with an alphanumeric character "
                "(e.g. 'my-name',  or '123-abc', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"))]
        return []
    if len(name) > 253 or not _SUBDOMAIN.match(name):
        return [st.invalid(path, name, (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character "
            "(e.g. 'example.com', regex used for validation is "
            r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"))]
    return []


def parse_rv(value: str, field: str = "") -> int:
    """A resourceVersion from a request; non-numeric is a bare 500 (no reason), as on the
    real server; `field` names the query parameter it came from (a watch's message does)."""
    try:
        if not value.isdigit():
            raise ValueError(value)
        return int(value)
    except ValueError:
        message = f'strconv.ParseUint: parsing "{value}": invalid syntax'
        if field:
            message = f"{field}: Invalid value: {st.go_value(value)}: {message}"
        raise st.ApiError(500, "", message) from None


def spec_changed(old: Obj, new: Obj) -> bool:
    """Anything but metadata and status differs: the generation moves."""
    def body(o: Obj) -> Obj:
        return {k: v for k, v in o.items() if k not in ("metadata", "status")}
    return body(old) != body(new)


def finalizers(obj: Obj) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def deleting(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))
