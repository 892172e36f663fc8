"""WATCH streams: newline-delimited JSON events, as the real server sends them.

resourceVersion "" or "0" starts with every current object as ADDED; a number N starts
after N (a compacted N gets HTTP 200 then one ERROR event with a 410 Expired Status).
With selectors, an object that stops matching is sent as DELETED and one that starts
matching as ADDED. Bookmarks (allowWatchBookmarks=true) are sent every
`bookmark_interval` seconds, only when the server's resourceVersion is newer than the
last one this watcher has seen.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import meta as mt
from . import status as st
from .objects import Call, Objects
from .selectors import selector_from_query
from .store import Event, TooOld

Obj = dict[str, Any]
Send = Callable[[Obj], bool]  # returns False once the client is gone

DEFAULT_TIMEOUT = 1800.0


@dataclass
class WatchOptions:
    bookmark_interval: float
    stop: threading.Event
    close_after: int | None = None  # fault: end the stream after this many events
    gone: bool = False              # fault: answer with a 410 ERROR event


def _error(err: st.ApiError) -> Obj:
    return {"type": "ERROR", "object": err.body()}


def run(objects: Objects, call: Call, send: Send, opts: WatchOptions) -> None:
    q = call.query
    if opts.gone:
        send(_error(st.expired("too old resource version: 1 (2)")))
        return
    rv_param = q.get("resourceVersion", "")
    since = None if rv_param in ("", "0") else mt.parse_rv(rv_param)
    matches = selector_from_query(q)
    timeout = float(q.get("timeoutSeconds") or DEFAULT_TIMEOUT)
    bookmarks = q.get("allowWatchBookmarks", "").lower() in ("true", "1")
    store = objects.store
    try:
        sub, first, seen = store.subscribe(call.res.id, call.namespace or None, since,
                                           snapshot=since is None)
    except TooOld as exc:
        send(_error(st.expired(str(exc))))
        return
    sent = 0
    deadline = time.monotonic() + timeout
    next_bookmark = time.monotonic() + opts.bookmark_interval

    def deliver(ev: Event) -> bool:
        nonlocal sent
        frame = _frame(objects, call, ev, matches)
        if frame is None:
            return True
        if not send(frame):
            return False
        sent += 1
        return opts.close_after is None or sent < opts.close_after

    try:
        if opts.close_after == 0:
            return
        for ev in first:
            if not deliver(ev):
                return
        while not opts.stop.is_set():
            now = time.monotonic()
            if now >= deadline:
                return
            try:
                ev = sub.events.get(timeout=min(0.1, deadline - now))
                seen = max(seen, ev.rv)
                if not deliver(ev):
                    return
                continue
            except queue.Empty:
                pass
            if bookmarks and time.monotonic() >= next_bookmark:
                next_bookmark = time.monotonic() + opts.bookmark_interval
                with store.lock:
                    current = store.rv if sub.events.empty() else seen
                if current > seen:
                    seen = current
                    if not send(_bookmark(call, current)):
                        return
    finally:
        store.unsubscribe(sub)


def _bookmark(call: Call, rv: int) -> Obj:
    return {"type": "BOOKMARK", "object": {
        "kind": call.res.kind, "apiVersion": call.api_version,
        "metadata": {"resourceVersion": str(rv)}}}


def _frame(objects: Objects, call: Call, ev: Event,
           matches: Callable[[Obj], bool]) -> Obj | None:
    now_matches = matches(ev.obj)
    was_matching = ev.old is not None and matches(ev.old)
    if ev.type == "ADDED":
        kind = "ADDED" if now_matches else None
    elif ev.type == "DELETED":
        kind = "DELETED" if (now_matches or was_matching) else None
    elif now_matches:
        kind = "MODIFIED" if was_matching else "ADDED"
    else:
        kind = "DELETED" if was_matching else None
    if kind is None:
        return None
    return {"type": kind, "object": objects.output(call, ev.obj)}


def encode(frame: Obj) -> bytes:
    return json.dumps(frame, separators=(",", ":")).encode() + b"\n"
