"""List pages: `limit` and `continue` as kube-apiserver's etcd storage pages a list.

A continue token is what the real server sends (base64url, no padding, of
{"v":"meta.k8s.io/v1","rv":N,"start":"<key after the last one read>\\u0000"}), so a
client that inspects or replays one sees the same shape."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import status as st

Obj = dict[str, Any]


def _key(obj: Obj, namespaced_list: bool) -> str:
    meta = obj["metadata"]
    if namespaced_list or not meta.get("namespace"):
        return f"/{meta['name']}"
    return f"/{meta['namespace']}/{meta['name']}"


def encode(last_key: str, rv: int) -> str:
    doc = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": last_key + "\u0000"},
                     separators=(",", ":"))
    return base64.urlsafe_b64encode(doc.encode()).decode().rstrip("=")


def decode(token: str) -> tuple[str, int]:
    """(the key to start from, the list's resourceVersion); ("", 0) without a token."""
    if not token:
        return "", 0
    try:
        doc = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return str(doc["start"]), int(doc["rv"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise st.bad_request(f"continue key is not valid: {token!r}") from None


@dataclass
class Page:
    items: list[Obj]
    next_key: str  # "" on the last page

    @classmethod
    def cut(cls, objs: list[Obj], matches: Callable[[Obj], bool], start: str, limit: int,
            namespaced_list: bool) -> Page:
        keyed = sorted((_key(o, namespaced_list), o) for o in objs)
        keyed = [(k, o) for k, o in keyed if k >= start] if start else keyed
        items: list[Obj] = []
        for index, (key, obj) in enumerate(keyed):
            if matches(obj):
                items.append(obj)
            if limit and len(items) == limit:
                return cls(items, key if index + 1 < len(keyed) else "")
        return cls(items, "")
