"""List-then-watch with bookmarks, reconnects, and a relist on 410 Gone.

`Watcher.until(predicate, deadline)` answers the first object (from the list or from
the watch) for which `predicate` holds. Between, it follows the API's contract:
- it watches from the list's resourceVersion with `allowWatchBookmarks=true`, and moves
  its resourceVersion forward on every event and bookmark;
- a watch the server ends (its time-out, a dropped connection) is reopened from the
  last resourceVersion seen, so nothing in between is missed;
- a version that is too old is answered by HTTP 200 and one ERROR event with a 410
  Status (or by HTTP 410): then it lists again and watches from the new version.
Every wait is bounded by the deadline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import field

from agent.errors import TemporaryError
from agent.kube.client import Client, Object
from agent.kube.errors import Gone, error_from_status
from agent.recordtype import record

log = logging.getLogger(__name__)

MAX_WATCH_SECONDS = 300
"""One watch request's server-side time-out; longer waits reconnect."""
RELISTS = 3
"""Lists tried in a row when each answers 410 Gone."""


class WaitTimedOut(TemporaryError):
    """The deadline passed before an object matched."""


@record
class WatchStats:
    """What happened while waiting (for logs and tests)."""

    lists: int = 0
    watches: int = 0
    bookmarks: int = 0
    relists_on_gone: int = 0


@record
class Watcher:
    client: Client
    path: str
    """The collection, e.g. /api/v1/namespaces/default/secrets."""
    field_selector: str | None = None
    label_selector: str | None = None
    monotonic: Callable[[], float] = time.monotonic
    stats: WatchStats = field(default_factory=WatchStats)

    def until(self, predicate: Callable[[Object], bool], deadline: float,
              describe: str) -> Object:
        """The first object for which `predicate` holds; WaitTimedOut at the deadline."""
        version = self._relist_matching(predicate)
        while isinstance(version, str):
            remaining = deadline - self.monotonic()
            if remaining <= 0:
                break
            version = self._watch_once(version, predicate, max(1, int(min(
                remaining, MAX_WATCH_SECONDS))))
        if isinstance(version, dict):
            return version
        raise WaitTimedOut(f"timed out waiting for {describe}",
                             hint="the agent keeps waiting on the next attempt")

    def _relist_matching(self, predicate: Callable[[Object], bool]) -> str | Object:
        """A matching object from a fresh list, else the list's resourceVersion."""
        for attempt in range(RELISTS):
            self.stats.lists += 1
            try:
                items, version = self.client.list(
                    self.path, label_selector=self.label_selector,
                    field_selector=self.field_selector)
            except Gone:
                # A list served from a cache that was just compacted; a new list reads
                # the current state.
                if attempt == RELISTS - 1:
                    raise
                self.stats.relists_on_gone += 1
                continue
            return next((item for item in items if predicate(item)), version)
        raise AssertionError("unreachable: RELISTS is at least 1")

    def _watch_once(self, version: str, predicate: Callable[[Object], bool],
                    timeout_seconds: int) -> str | Object:
        """Follow one watch connection: a match, or the version to go on from."""
        params = {"resourceVersion": version, "allowWatchBookmarks": "true"}
        for key, value in (("fieldSelector", self.field_selector),
                           ("labelSelector", self.label_selector)):
            if value:
                params[key] = value
        self.stats.watches += 1
        try:
            for event in self.client.watch_stream(self.path, params, timeout_seconds):
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    raise error_from_status(int(obj.get("code") or 500), obj,
                                            f"WATCH {self.path}")
                version = str(obj.get("metadata", {}).get("resourceVersion") or version)
                if kind == "BOOKMARK":
                    self.stats.bookmarks += 1
                elif kind in ("ADDED", "MODIFIED") and predicate(obj):
                    return obj
        except Gone:
            log.info("watch of %s from resourceVersion %s expired (410); listing again",
                     self.path, version)
            self.stats.relists_on_gone += 1
            return self._relist_matching(predicate)
        return version
