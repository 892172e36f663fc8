"""Where a system path lands under the Host's root, and the one bounded way to read a file.

An image tree (`--root DIR`) is a jail: its links mean what they would mean on the booted
node, so an absolute link (`var/run -> /run`, a linked state directory) resolves against
the tree, never against the build host, and `..` stops at the tree's top, as
openat2(2)'s RESOLVE_IN_ROOT does. A read takes regular files only (a FIFO would hang the
agent, /dev/zero would fill its memory) and stops at its limit while reading, not after.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

MAX_LINKS = 40
"""Links followed while resolving one path (the kernel's own bound, ELOOP)."""

DEFAULT_READ_LIMIT = 64 << 20
"""What any one file the agent reads may hold unless its reader says otherwise."""


class UnreadableFileError(OSError):
    """A file the agent will not read: not a regular file, or over its size limit. An
    OSError, so every reader's `except OSError` says it as it says a missing file."""

    def __str__(self) -> str:
        return str(self.strerror)


def resolve_in_root(root: Path, parts: Sequence[str], *, follow_last: bool = True) -> Path:
    """The path under `root` that the system path made of `parts` (no leading "/") names
    when `root` is the file system's root: every link followed inside `root` (an absolute
    target starts again at `root`; `..` never climbs above it); the last component's own
    link only with `follow_last` (a write or removal replaces the link, not its target).
    What does not exist yet is taken as written."""
    todo = list(parts)
    done: list[str] = []
    missing = False
    links = 0
    while todo:
        name = todo.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            if done:
                done.pop()
            continue
        if missing or (not todo and not follow_last):
            done.append(name)
            continue
        here = root.joinpath(*done, name)
        try:
            mode = os.lstat(here).st_mode
        except (FileNotFoundError, NotADirectoryError):
            missing = True
            done.append(name)
            continue
        if not stat.S_ISLNK(mode):
            done.append(name)
            continue
        links += 1
        if links > MAX_LINKS:
            raise OSError(errno.ELOOP, f"more than {MAX_LINKS} links in /{'/'.join(parts)}")
        target = PurePosixPath(os.readlink(here))
        if target.is_absolute():
            done = []
            todo = [*target.parts[1:], *todo]
        else:
            todo = [*target.parts, *todo]
    return root.joinpath(*done)


def read_regular(path: str | Path, limit: int = DEFAULT_READ_LIMIT) -> bytes:
    """The bytes of the regular file at `path` (a real path), refused when it holds more
    than `limit`, counted while reading. A FIFO, device or socket is refused before any
    read (opened non-blocking, so a FIFO with no writer cannot hang the open)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        kind = os.fstat(fd).st_mode
        if stat.S_ISDIR(kind):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(kind):
            raise UnreadableFileError(errno.EINVAL, f"is {_kind(kind)}, not a regular "
                                      "file", str(path))
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                raise UnreadableFileError(errno.EFBIG, f"is larger than {limit} bytes",
                                          str(path))
            chunks.append(chunk)
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"
