"""The Host's locks: exclusive advisory locks on lock files, re-entrant within a
thread, naming their holder."""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterator

from agent.errors import StateError
from agent.host.base import HostState

_HELD: dict[tuple[str, int], int] = {}
"""Lock files held, by thread, with how many times (Host.lock is re-entrant)."""


class LockBusyError(StateError):
    """Another process holds a lock the caller would not wait for."""

    def __init__(self, system_path: str, holder: str) -> None:
        super().__init__(
            f"another command is changing this node ({holder or 'holder unknown'}; lock "
            f"{system_path})",
            hint="wait for it to finish (`machine-agent status --wait`), or run again "
                 "without --no-wait to wait for it", temporary=True)
        self.holder = holder


HOLDER_WAIT = 0.2
"""How long a waiter looks for the holder's name: the holder writes it right after taking
the lock, so a lock taken an instant ago has an empty file."""


def _read_holder(fd: int) -> str:
    """Who holds a lock file, as its holder wrote it (one short line); "" when it wrote
    none within HOLDER_WAIT."""
    deadline = time.monotonic() + HOLDER_WAIT
    while True:
        try:
            text = os.pread(fd, 200, 0).decode(errors="replace")
        except OSError:
            return ""
        first = text.split("\n", 1)[0].strip()
        if first or time.monotonic() >= deadline:
            return first
        time.sleep(0.005)


class Locks(HostState):
    """A part of Host (agent.host)."""

    def holds_lock(self, system_path: str) -> bool:
        """Whether this thread holds the lock on `system_path` already."""
        import threading

        return _HELD.get((str(self.path(system_path, follow_last=False)),
                          threading.get_ident()), 0) > 0

    @contextlib.contextmanager
    def lock(self, system_path: str, *, holder: str | None = None,
             on_busy: Callable[[str], bool] | None = None) -> Iterator[None]:
        """An exclusive advisory lock (flock) on a lock file, across processes and threads.

        Re-entrant within a thread (the daemon's reconfiguration may run the bootstrap,
        which takes the node lock again); other threads wait as other processes do.
        `holder` (e.g. "pid 42: machine-agent run") is written into the file while the
        lock is held, so a waiter can name it. When the
        lock is taken, `on_busy(holder_text)` is asked first: True waits for it, False
        raises `LockBusyError` naming the holder. Taking a lock changes nothing a user
        sees, so it is not counted as a side effect.
        """
        import fcntl
        import threading

        target = self.path(system_path, follow_last=False)

        key = (str(target), threading.get_ident())
        if _HELD.get(key, 0) > 0:
            _HELD[key] += 1
            try:
                yield
            finally:
                _HELD[key] -= 1
            return
        self._make_dirs(target.parent, 0o700)
        try:
            # never through a link: its target (any file) would be truncated to the holder
            fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                         0o600)
        except OSError as err:  # a read-only or full state directory: said, not a traceback
            if err.errno == errno.ELOOP:
                raise StateError(f"the lock file {system_path} is a symbolic link; the "
                                 "agent takes locks on regular files only",
                                 hint=f"remove the link {system_path}") from err
            raise StateError(f"cannot write {system_path}: {err.strerror}") from err
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                current = _read_holder(fd)
                if on_busy is not None and not on_busy(current):
                    raise LockBusyError(system_path, current) from None
                fcntl.flock(fd, fcntl.LOCK_EX)
            if holder is not None:
                try:  # written, then cut to length: never empty for a waiter to read
                    line = holder.encode() + b"\n"
                    os.pwrite(fd, line, 0)
                    os.ftruncate(fd, len(line))
                except OSError as err:
                    raise StateError(f"cannot write {system_path}: {err.strerror}") from err
            _HELD[key] = 1
            try:
                yield
            finally:
                _HELD.pop(key, None)
                if holder is not None:
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing releases the lock
