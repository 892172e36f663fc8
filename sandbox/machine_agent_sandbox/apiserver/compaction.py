"""etcd's history compacted in the background, as kube-apiserver has it done: every
interval (its --etcd-compaction-interval, 5 minutes by default) the history is compacted
up to the revision the previous round saw, so a watch or a list from an older
resourceVersion is answered as a real server past its compactions answers it (a watch:
one ERROR event, 410 Expired; a list: 410). At least one interval of history is kept."""

from __future__ import annotations

import threading

from .store import Store

DEFAULT_INTERVAL = 300.0


class Compactor:
    def __init__(self, store: Store, interval: float) -> None:
        self._store = store
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seen = store.rv

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sandbox-compaction",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def round(self) -> int:
        """One compaction: up to what the previous round saw. Returns the new floor."""
        floor = self._store.compact(self._seen)
        self._seen = self._store.rv
        return floor

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.round()
