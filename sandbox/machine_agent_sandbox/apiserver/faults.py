"""Fault injection and request counters — test hooks the real server does not have.

A fault matches requests by HTTP method and a regular expression searched in the path
(query string excluded). It fires `count` times (None: until cleared). Kinds:

- `latency`: sleep `seconds`, then answer normally;
- `429`: TooManyRequests with `Retry-After: retry_after`;
- `500`: an InternalError Status;
- `drop`: close the connection without answering;
- `close_watch`: a watch stream ends (cleanly) after `after_events` events;
- `410`: a LIST answers 410 Expired; a WATCH answers 200 then one ERROR event (410);
- `reset` (close with a TCP RST) and `503` (ServiceUnavailable): only the tests' fault
  proxy (testkit/faultproxy.py) injects these.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass, field

KINDS = ("latency", "429", "500", "drop", "close_watch", "410", "reset", "503")


@dataclass
class Fault:
    kind: str
    path: str = ".*"
    method: str = "*"
    count: int | None = None
    seconds: float = 0.0
    retry_after: int = 1
    after_events: int = 0
    hits: int = 0
    _regex: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; choose from {KINDS}")
        self._regex = re.compile(self.path)

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.hits >= self.count

    def matches(self, method: str, path: str) -> bool:
        return (self.method in ("*", method.upper())) and bool(self._regex.search(path))


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, kind: str, path: str = ".*", method: str = "*", count: int | None = None,
            seconds: float = 0.0, retry_after: int = 1, after_events: int = 0) -> Fault:
        fault = Fault(kind, path, method.upper(), count, seconds, retry_after, after_events)
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self, fault: Fault | None = None) -> None:
        with self._lock:
            if fault is None:
                self._faults.clear()
            elif fault in self._faults:
                self._faults.remove(fault)

    def list(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def take(self, method: str, path: str, kinds: tuple[str, ...]) -> Fault | None:
        """The first live fault of one of `kinds` matching the request; counts a hit."""
        with self._lock:
            for fault in self._faults:
                if fault.kind in kinds and not fault.exhausted and fault.matches(method, path):
                    fault.hits += 1
                    return fault
        return None


class Counters:
    """Requests seen, by (verb, resource) — e.g. ("patch", "machines/status")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()

    def count(self, verb: str, resource: str) -> None:
        with self._lock:
            self._counts[(verb, resource)] += 1

    def snapshot(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
