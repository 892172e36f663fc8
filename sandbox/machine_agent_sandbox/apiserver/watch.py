"""WATCH streams: newline-delimited JSON events, as the real server sends them.

resourceVersion "" or "0" (or sendInitialEvents=true, which needs
resourceVersionMatch=NotOlderThan: 422 otherwise) starts with every current object as
ADDED, and with allowWatchBookmarks=true a BOOKMARK annotated
`k8s.io/initial-events-end: "true"` after them; a number N starts after N (a compacted N
gets HTTP 200 then one ERROR event with a 410 Expired Status, never a replay). With
selectors, an object that stops matching is sent as DELETED and one that starts matching
as ADDED. Other bookmarks (allowWatchBookmarks=true) come 2 s before the watch's deadline
and every `bookmark_interval` seconds (the real cache: about 60 s), only when an object of
the watched type changed after the last version this watcher has seen (a change its
selector filters out counts), carrying the server's current resourceVersion.
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
from .calls import Call
from .objects import Objects
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


def _true(value: str) -> bool:
    return value.lower() in ("true", "1")


def validate(call: Call) -> None:
    """What is refused before the stream starts (the handler's ListOptions checks)."""
    q = call.query
    rv_param = q.get("resourceVersion", "")
    if rv_param not in ("", "0"):
        mt.parse_rv(rv_param, "resourceVersion")
    if _true(q.get("sendInitialEvents", "")) and q.get("resourceVersionMatch") != "NotOlderThan":
        why = "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        raise st.ApiError(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: '
                          f"resourceVersionMatch: Forbidden: {why}", {
                              "group": "meta.k8s.io", "kind": "ListOptions",
                              "causes": [st.forbidden_field("resourceVersionMatch",
                                                            why).cause()]})


def run(objects: Objects, call: Call, send: Send, opts: WatchOptions) -> None:
    q = call.query
    if opts.gone:
        send(_error(st.expired("too old resource version: 1 (2)")))
        return
    rv_param = q.get("resourceVersion", "")
    initial = rv_param in ("", "0") or _true(q.get("sendInitialEvents", ""))
    since = None if initial else mt.parse_rv(rv_param)
    matches = selector_from_query(q, call.res.id)
    timeout = float(q.get("timeoutSeconds") or DEFAULT_TIMEOUT)
    bookmarks = _true(q.get("allowWatchBookmarks", ""))
    store = objects.store
    try:
        sub, first, seen = store.subscribe(call.res.storage_id, call.namespace or None, since,
                                           snapshot=since is None)
    except TooOld as exc:
        send(_error(st.expired(str(exc))))
        return
    sent = 0
    start = time.monotonic()
    deadline = start + timeout
    # the cache's bookmark before the deadline, then its periodic ones
    bookmark_times = sorted(t for t in (deadline - 2.0,) if t > start)
    next_bookmark = start + opts.bookmark_interval

    if since is not None:
        seen = since  # what this watcher has seen: moves only with what it is sent

    def deliver(ev: Event) -> bool:
        nonlocal sent, seen
        frame = _frame(objects, call, ev, matches)
        if frame is None:
            return True
        if not send(frame):
            return False
        seen = max(seen, ev.rv)
        sent += 1
        return opts.close_after is None or sent < opts.close_after

    try:
        if opts.close_after == 0:
            return
        for ev in first:
            if not deliver(ev):
                return
        if initial and bookmarks and not send(_bookmark(call, seen, initial_events_end=True)):
            return
        while not opts.stop.is_set():
            now = time.monotonic()
            if now >= deadline:
                return
            try:
                ev = sub.events.get(timeout=min(0.1, deadline - now))
                if not deliver(ev):
                    return
                continue
            except queue.Empty:
                pass
            now = time.monotonic()
            due = now >= next_bookmark or (bookmark_times and now >= bookmark_times[0])
            if bookmarks and due:
                if now >= next_bookmark:
                    next_bookmark = now + opts.bookmark_interval
                bookmark_times = [t for t in bookmark_times if t > now]
                with store.lock:
                    changed = store.resource_rv(call.res.storage_id) > seen and sub.events.empty()
                    current = store.rv
                if changed:
                    seen = current
                    if not send(_bookmark(call, current)):
                        return
    finally:
        store.unsubscribe(sub)


def _bookmark(call: Call, rv: int, initial_events_end: bool = False) -> Obj:
    meta: Obj = {"resourceVersion": str(rv)}
    if initial_events_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"type": "BOOKMARK", "object": {
        "kind": call.res.kind, "apiVersion": call.api_version, "metadata": meta}}


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
