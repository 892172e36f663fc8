"""What every part of the Host shares: its settings (root, read-only, clock, effects,
namespace, environment), where a system path lives under the root, and the count
of side effects."""

from __future__ import annotations

import datetime as dt
import logging
import os
import signal
import time
from dataclasses import field
from pathlib import Path, PurePosixPath
from typing import TypeVar

from agent.errors import PermanentError, Reason, StateError
from agent.hostpath import resolve_in_root
from agent.logs import Redactor
from agent.recordtype import record

log = logging.getLogger("agent.host")  # one logger for the whole Host


T = TypeVar("T")


ROOT = Path("/")


class ReadOnlyHostError(RuntimeError):
    """A side effect was attempted through a read-only Host (plan, doctor): a bug."""


class Clock:
    """Wall time for records, monotonic time for waits. Tests hand in a fake."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


@record
class EffectLog:
    """Counts side effects; optionally ends the process right after the Nth (crash tests)."""

    crash_after: int | None = None
    count: int = 0
    recent: list[str] = field(default_factory=list)

    def record(self, what: str) -> None:
        self.count += 1
        self.recent = [*self.recent[-49:], what]
        log.debug("effect %d: %s", self.count, what)
        if self.crash_after is not None and self.count >= self.crash_after:
            os.kill(os.getpid(), signal.SIGKILL)


class HostState:
    """The settings every part reads (set by Host.__init__) and what they all use."""

    root: Path
    image: bool
    read_only: bool
    clock: Clock
    effects: EffectLog
    redact: Redactor
    netns: str | None
    env: dict[str, str]

    def path(self, system_path: str | PurePosixPath, *, follow_last: bool = True) -> Path:
        """Where a system path lives under the root, its links resolved inside the root
        as the booted node would resolve them (agent/hostpath.py): nothing lands outside
        an image tree. `follow_last=False` leaves the last component's own link (what a
        write or removal replaces). Refuses relative paths and `..`."""
        p = PurePosixPath(system_path)
        if not p.is_absolute():
            raise PermanentError(f"path {str(system_path)!r} is not absolute",
                                 reason=Reason.ConfigInvalid,
                                 hint="give a path starting with /")
        if ".." in p.parts or any("\n" in part or "\0" in part for part in p.parts):
            raise PermanentError(f"path {str(system_path)!r} is not a plain absolute "
                                 "path", reason=Reason.ConfigInvalid,
                                 hint="no '..', newline or NUL in paths")
        if self.root == ROOT:  # the running node: the kernel resolves as it always does
            return self.root.joinpath(*p.parts[1:])
        try:
            return resolve_in_root(self.root, p.parts[1:], follow_last=follow_last)
        except OSError as err:
            raise PermanentError(f"path {system_path} under {self.root}: {err.strerror}",
                                 reason=Reason.StateUnwritable,
                                 hint="fix the links in the tree") from err

    def _make_dirs(self, directory: Path, mode: int) -> None:
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=mode)
        except OSError as err:
            raise StateError(f"cannot create {directory}: {err.strerror}") from err

    @staticmethod
    def _fsync_dir(directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def check_writable(self, what: str) -> None:
        """Refuse `what` on a read-only host (plan, doctor): reaching here is a bug."""
        if self.read_only:
            raise ReadOnlyHostError(f"refused on a read-only host: {what}")

    def record_effect(self, what: str) -> None:
        """Count a side effect made through a handle the Host gave out (netlink)."""
        self.check_writable(what)
        self.effects.record(what)
