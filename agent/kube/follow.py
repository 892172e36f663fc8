"""Following one named object (the Machine, its AgentConfig) from a thread of its own.

`Follower` lists the object, then watches it from the list's resourceVersion, and hands
every version it sees to a callback as an `Update` (None once the object is gone). It
never polls: between events it is blocked in a read, so a quiet object costs no
wake-ups. A watch the server ends at its time-out is reopened from the last version;
after a failure (no answer, 5xx, a stream cut short, 410 Gone) it waits a jittered
backoff, lists again when the version expired, and tells `Recovered` once a list or
watch succeeds again, so that what waited for the management cluster can be sent.

`stop()` ends it at once, also while it is blocked in a read: it shuts the watch
connection down (agent.kube.client.Client.watch_stream's `on_open`), and the client's
retry pauses wait on the same stop event.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from agent.errors import AgentError
from agent.kube.client import Client, Object
from agent.kube.errors import Gone, error_from_status
from agent.kube.watch import MAX_WATCH_SECONDS
from agent.recordtype import record
from agent.retry import Backoff

log = logging.getLogger(__name__)

RECONNECT_BACKOFF = Backoff(base=0.5, cap=30.0, attempts=0)
"""Pauses between reconnects after failures (attempts unused: it retries until stopped)."""


@record(frozen=True)
class Update:
    source: str
    """What is followed, e.g. `machine` (the Follower's name)."""
    obj: Object | None
    """The object's current version; None when it does not exist (any more)."""


@record(frozen=True)
class Recovered:
    """The management cluster answers again after a failure of the watch (sent before
    the updates the new connection brings)."""

    source: str


class Follower:
    def __init__(self, client: Client, path: str, name: str, source: str,
                 on_update: Callable[[Update | Recovered], None], *,
                 backoff: Backoff = RECONNECT_BACKOFF,
                 watch_seconds: int = MAX_WATCH_SECONDS,
                 stopped: threading.Event | None = None) -> None:
        self.client = client
        self.path = path
        """The collection, e.g. /api/v1/namespaces/NS/configmaps."""
        self.selector = f"metadata.name={name}"
        self.source = source
        self.on_update = on_update
        self.backoff = backoff
        self.watch_seconds = watch_seconds
        self.stopped = stopped or threading.Event()
        """Set by stop(); share it with the client's retry sleep so its pauses end too."""
        self._close: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._failed = False
        self._thread = threading.Thread(target=self._run, name=f"follow-{source}",
                                        daemon=True)

    def start(self) -> Follower:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """End the watch now and wait (bounded) for the thread to finish."""
        self.stopped.set()
        with self._lock:
            close = self._close
        if close is not None:
            close()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- the thread --------------------------------------------------------------------

    def _run(self) -> None:
        version: str | None = None
        failures = 0
        while not self.stopped.is_set():
            try:
                if version is None:
                    items, version = self.client.list(self.path,
                                                      field_selector=self.selector)
                    self._emit(items[0] if items else None)
                started, seen = time.monotonic(), 0
                try:
                    for event in self.client.watch_stream(
                            self.path, self._params(version), self.watch_seconds,
                            self._opened):
                        version = self._handle(event, version)
                        seen += 1
                finally:
                    with self._lock:
                        self._close = None
                if self.stopped.is_set():
                    return
                if seen or time.monotonic() - started >= self.watch_seconds - 1:
                    failures = 0
                    continue  # the server's time-out (or news): reopen at once
                # Ended early with nothing: a cut connection or a closing server.
                log.info("the watch of %s ended early; reconnecting", self.source)
            except Gone:
                log.info("the watch of %s expired (410); listing again", self.source)
                version = None
            except AgentError as err:
                log.warning("following %s: %s", self.source, err)
            except Exception:  # a bug must not end the watch silently
                log.exception("following %s failed", self.source)
            self._failed = True
            failures += 1
            if self.stopped.wait(self.backoff.delay(min(failures, 10))):
                return

    def _params(self, version: str) -> dict[str, str]:
        return {"resourceVersion": version, "allowWatchBookmarks": "true",
                "fieldSelector": self.selector}

    def _opened(self, close: Callable[[], None]) -> None:
        with self._lock:
            self._close = close
        if self.stopped.is_set():  # stop() came while the watch was being opened
            close()
            return
        self._emit_recovered()

    def _handle(self, event: Object, version: str) -> str:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            raise error_from_status(int(obj.get("code") or 500), obj, f"WATCH {self.path}")
        version = str(obj.get("metadata", {}).get("resourceVersion") or version)
        if kind in ("ADDED", "MODIFIED"):
            self._emit(obj)
        elif kind == "DELETED":
            self._emit(None)
        return version

    def _emit(self, obj: Object | None) -> None:
        self._emit_recovered()
        self.on_update(Update(self.source, obj))

    def _emit_recovered(self) -> None:
        if self._failed:
            self._failed = False
            self.on_update(Recovered(self.source))
