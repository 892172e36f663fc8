"""Objects, the global resourceVersion, a bounded event history and watch fan-out.

One lock guards everything; writers hold it across read-modify-write. A stored object is
never changed in place (put stores a copy of what it is given, and replaces it whole), so
`view` and `peek` may hand out the stored objects themselves to readers that do not change
them: copying a whole collection per request (the authorizer's bindings, a list that a
selector narrows to one item) cost much of the stand-in's time under a fleet's load.
Indexes by uid, by owner uid and of terminating objects let the garbage collector find
what it acts on without copying the whole store at every event (which cost the most).

resourceVersion is a single increasing integer for the whole server (as etcd's revision
is). The history keeps the last `history_size` events; a watch may start from any version
not older than the oldest kept event ("compaction" drops the rest, and `compact()` drops
all now).
"""

from __future__ import annotations

import builtins
import copy
import queue
import threading
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
ObjKey = tuple[str, str]  # (namespace or "", name)
Loc = tuple[str, ObjKey]  # (res_id, key)


@dataclass(frozen=True)
class Event:
    type: str  # ADDED | MODIFIED | DELETED
    rv: int
    res_id: str
    obj: Obj
    old: Obj | None = None


class TooOld(Exception):
    """The requested resourceVersion is older than the kept history."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


@dataclass
class Subscription:
    res_id: str | None  # None: every resource (controllers)
    namespace: str | None
    events: queue.SimpleQueue[Event] = field(default_factory=queue.SimpleQueue)

    def wants(self, ev: Event) -> bool:
        if self.res_id is not None and ev.res_id != self.res_id:
            return False
        ns = ev.obj.get("metadata", {}).get("namespace", "")
        return self.namespace is None or ns == self.namespace


class Store:
    def __init__(self, history_size: int = 1000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._objects: dict[str, dict[ObjKey, Obj]] = {}
        self._rv = 0
        self._resource_rv: dict[str, int] = {}  # last change of each resource type
        self._floor = 0  # watches from below this version are too old
        self._history: deque[Event] = deque()
        self._history_size = history_size
        self._subs: list[Subscription] = []
        self._uids: Counter[Any] = Counter()  # how many stored objects carry each uid
        self._dependents: dict[str, set[Loc]] = {}  # owner uid -> its dependents
        self._terminating: set[Loc] = set()  # objects with a deletionTimestamp

    def _index(self, loc: Loc, obj: Obj, add: bool) -> None:
        meta = obj["metadata"]
        uid = meta.get("uid")
        if isinstance(uid, (str, type(None))):
            self._uids[uid] += 1 if add else -1
            if self._uids[uid] <= 0:
                del self._uids[uid]
        for ref in meta.get("ownerReferences") or []:
            owner = ref.get("uid") if isinstance(ref, dict) else None
            if not isinstance(owner, str):
                continue
            if add:
                self._dependents.setdefault(owner, set()).add(loc)
            elif owner in self._dependents:
                self._dependents[owner].discard(loc)
                if not self._dependents[owner]:
                    del self._dependents[owner]
        if meta.get("deletionTimestamp"):
            if add:
                self._terminating.add(loc)
            else:
                self._terminating.discard(loc)

    def _in_order(self, locs: builtins.set[Loc]) -> builtins.list[tuple[str, Obj]]:
        """The stored objects at `locs`, in all_objects' order (not copied)."""
        if len(locs) <= 1:
            return [(res_id, self._objects[res_id][key]) for res_id, key in locs]
        return [(res_id, o) for res_id, objs in self._objects.items()
                for key, o in objs.items() if (res_id, key) in locs]

    @property
    def rv(self) -> int:
        with self.lock:
            return self._rv

    def resource_rv(self, res_id: str) -> int:
        """The last resourceVersion that changed an object of this type (what the real
        server's per-type watch cache has seen)."""
        with self.lock:
            return self._resource_rv.get(res_id, 0)

    @property
    def floor(self) -> int:
        with self.lock:
            return self._floor

    def get(self, res_id: str, namespace: str, name: str) -> Obj | None:
        with self.lock:
            obj = self._objects.get(res_id, {}).get((namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def peek(self, res_id: str, namespace: str, name: str) -> Obj | None:
        """The stored object itself, for a reader that does not change it."""
        with self.lock:
            return self._objects.get(res_id, {}).get((namespace, name))

    def view(self, res_id: str, namespace: str | None = None,
             where: Callable[[Obj], bool] | None = None) -> tuple[builtins.list[Obj], int]:
        """What `list` returns, without copying: the stored objects themselves, for a
        reader that does not change them (it may copy what it keeps or hands on)."""
        with self.lock:
            objs = [o for (ns, _), o in sorted(self._objects.get(res_id, {}).items())
                    if (namespace is None or ns == namespace) and (where is None or where(o))]
            return objs, self._rv

    def list(self, res_id: str, namespace: str | None = None,
             where: Callable[[Obj], bool] | None = None) -> tuple[list[Obj], int]:
        """Copies of the objects (of `namespace`) for which `where` holds, by key. `where`
        sees the stored object and must not change it: filtering before copying keeps a
        selected list of a large collection cheap, as the real watch cache does."""
        with self.lock:
            objs = [copy.deepcopy(o) for (ns, _), o in
                    sorted(self._objects.get(res_id, {}).items())
                    if (namespace is None or ns == namespace) and (where is None or where(o))]
            return objs, self._rv

    def all_objects(self) -> builtins.list[tuple[str, Obj]]:
        with self.lock:
            return [(res_id, copy.deepcopy(o)) for res_id, objs in self._objects.items()
                    for o in objs.values()]

    def select(self, where: Callable[[Obj], bool]) -> builtins.list[tuple[str, Obj]]:
        """Copies of the objects of every type for which `where` holds (it sees the
        stored object and must not change it), in all_objects' order."""
        with self.lock:
            return [(res_id, copy.deepcopy(o)) for res_id, objs in self._objects.items()
                    for o in objs.values() if where(o)]

    def alive(self, uid: Any) -> bool:
        """Whether a stored object carries this uid."""
        with self.lock:
            return isinstance(uid, (str, type(None))) and uid in self._uids

    def dependents(self, uid: str) -> builtins.list[tuple[str, Obj]]:
        """Copies of the objects whose ownerReferences name `uid`, in all_objects' order."""
        with self.lock:
            return [(r, copy.deepcopy(o)) for r, o in
                    self._in_order(self._dependents.get(uid, builtins.set()))]

    def terminating(self) -> builtins.list[tuple[str, Obj]]:
        """Copies of the objects that have a deletionTimestamp, in all_objects' order."""
        with self.lock:
            return [(r, copy.deepcopy(o)) for r, o in self._in_order(self._terminating)]

    def put(self, res_id: str, obj: Obj) -> Obj:
        """Create or replace; assigns the next resourceVersion and emits the event."""
        with self.lock:
            meta = obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            bucket = self._objects.setdefault(res_id, {})
            old = bucket.get(key)
            self._rv += 1
            stored = copy.deepcopy(obj)
            stored["metadata"]["resourceVersion"] = str(self._rv)
            if old is not None:
                self._index((res_id, key), old, add=False)
            bucket[key] = stored
            self._index((res_id, key), stored, add=True)
            self._emit(Event("MODIFIED" if old is not None else "ADDED", self._rv, res_id,
                             copy.deepcopy(stored), old))
            return copy.deepcopy(stored)

    def delete(self, res_id: str, namespace: str, name: str) -> Obj | None:
        with self.lock:
            old = self._objects.get(res_id, {}).pop((namespace, name), None)
            if old is None:
                return None
            self._index((res_id, (namespace, name)), old, add=False)
            self._rv += 1
            gone = copy.deepcopy(old)
            gone["metadata"]["resourceVersion"] = str(self._rv)
            self._emit(Event("DELETED", self._rv, res_id, copy.deepcopy(gone), old))
            return gone

    def _emit(self, ev: Event) -> None:
        self._resource_rv[ev.res_id] = ev.rv
        self._history.append(ev)
        while len(self._history) > self._history_size:
            self._floor = self._history.popleft().rv
        for sub in self._subs:
            if sub.wants(ev):
                sub.events.put(ev)
        self.changed.notify_all()

    def subscribe(self, res_id: str | None, namespace: str | None, since: int | None,
                  snapshot: bool = False) -> tuple[Subscription, builtins.list[Event], int]:
        """Register a watcher; returns it, the events to send first, and the version they
        bring the watcher to. With `since`: the kept events after it (TooOld if some are
        gone); with `snapshot`: every current object as ADDED. The caller sends those,
        then what arrives on the subscription's queue."""
        with self.lock:
            sub = Subscription(res_id, namespace)
            first: builtins.list[Event] = []
            if since is not None:
                if since < self._floor:
                    raise TooOld(since, self._floor)
                first = [ev for ev in self._history if ev.rv > since and sub.wants(ev)]
            elif snapshot and res_id is not None:
                for (ns, _), obj in sorted(self._objects.get(res_id, {}).items()):
                    if namespace is None or ns == namespace:
                        first.append(Event("ADDED", int(obj["metadata"]["resourceVersion"]),
                                           res_id, copy.deepcopy(obj)))
            self._subs.append(sub)
            return sub, first, max(self._rv, since or 0)

    def unsubscribe(self, sub: Subscription) -> None:
        with self.lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def compact(self, upto: int | None = None) -> int:
        """Forget the history up to `upto` (default: all of it, now), as etcd's compaction
        does; returns the new floor: watches and lists from below it are too old."""
        with self.lock:
            upto = self._rv if upto is None else min(upto, self._rv)
            while self._history and self._history[0].rv <= upto:
                self._history.popleft()
            self._floor = max(self._floor, upto)
            return self._floor

    def wait_for(self, rv: int, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self._rv >= rv, timeout)
