"""The Host's files: read, written atomically (temp file, fsync, rename), removed,
always by their system path under the root."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path, PurePosixPath

from agent.errors import StateError
from agent.host.base import HostState
from agent.hostpath import DEFAULT_READ_LIMIT, read_regular

_TEMP_FILE = re.compile(r"\..+\.[A-Za-z0-9_]{8}\.tmp")
"""How `write_file` names its temp file (tempfile.mkstemp's 8 random characters)."""


class Files(HostState):
    """A part of Host (agent.host)."""

    def exists(self, system_path: str) -> bool:
        return self.path(system_path).exists()

    def read_bytes(self, system_path: str, *, limit: int = DEFAULT_READ_LIMIT) -> bytes:
        """A regular file's bytes, refused (UnreadableFileError, an OSError) when it is a
        FIFO, a device or a socket, or holds more than `limit` bytes."""
        return read_regular(self.path(system_path), limit)

    def read_text(self, system_path: str, default: str | None = None, *,
                  limit: int = DEFAULT_READ_LIMIT) -> str | None:
        """The file's text (as `read_bytes`), or `default` when it does not exist."""
        try:
            return self.read_bytes(system_path, limit=limit).decode()
        except FileNotFoundError:
            return default

    def mode_and_owner(self, system_path: str) -> tuple[int, int, int]:
        """A file's permission bits, uid and gid."""
        found = self.path(system_path).stat()
        return found.st_mode & 0o7777, found.st_uid, found.st_gid

    def list_dir(self, system_path: str) -> list[str]:
        """Names in a directory, sorted; empty when it does not exist."""
        try:
            return sorted(os.listdir(self.path(system_path)))
        except FileNotFoundError:
            return []

    def write_file(
        self,
        system_path: str,
        data: str | bytes,
        *,
        mode: int = 0o644,
        owner: tuple[int, int] | None = None,
        dir_mode: int = 0o755,
    ) -> None:
        """Atomically replace a file: temp file in the same directory, fsync, rename."""
        self.check_writable(f"write {system_path}")
        target = self.path(system_path, follow_last=False)
        self._make_dirs(target.parent, dir_mode)
        payload = data.encode() if isinstance(data, str) else data
        try:  # a read-only or full file system fails here already
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                       dir=target.parent)
        except OSError as err:
            raise StateError(f"cannot write {system_path}: {err.strerror}") from err
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            if owner is not None:
                os.chown(tmp, *owner)
            os.replace(tmp, target)
        except OSError as err:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise StateError(f"cannot write {system_path}: {err.strerror}") from err
        self._fsync_dir(target.parent)
        self.effects.record(f"write {system_path}")

    def make_dir(self, system_path: str, mode: int = 0o755) -> None:
        self.check_writable(f"mkdir {system_path}")
        target = self.path(system_path)
        if target.is_dir():
            if (target.stat().st_mode & 0o777) != mode:
                os.chmod(target, mode)
                self.effects.record(f"chmod {system_path}")
            return
        self._make_dirs(target, mode)
        self.effects.record(f"mkdir {system_path}")

    def remove(self, system_path: str) -> bool:
        """Remove a file; False when there was none."""
        self.check_writable(f"remove {system_path}")
        try:
            self.path(system_path, follow_last=False).unlink()
        except FileNotFoundError:
            return False
        self.effects.record(f"remove {system_path}")
        return True

    def is_real_dir(self, system_path: str) -> bool:
        """A directory itself, not a link to one."""
        target = self.path(system_path, follow_last=False)
        return not target.is_symlink() and target.is_dir()

    def is_executable(self, system_path: str) -> bool:
        """A regular file the agent may execute (what a runtime needs of a CNI plugin)."""
        target = self.path(system_path)
        return target.is_file() and os.access(target, os.X_OK)

    def make_temp_dir(self, parent: str, prefix: str) -> str:
        """A new private directory under `parent` (a system path), for staging a tree
        on the same file system as its destination so it can be renamed into place."""
        self.check_writable(f"mkdtemp {parent}/{prefix}*")
        base = self.path(parent)
        self._make_dirs(base, 0o755)
        made = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        self.effects.record(f"mkdtemp {parent}/{made.name}")
        return str(PurePosixPath(parent) / made.name)

    def rename(self, source: str, target: str) -> None:
        """Atomically move `source` over `target` (same file system), then fsync the
        target's directory so the rename survives a crash."""
        self.check_writable(f"rename {source} {target}")
        dst = self.path(target, follow_last=False)
        self._make_dirs(dst.parent, 0o755)
        try:
            os.replace(self.path(source, follow_last=False), dst)
        except OSError as err:
            raise StateError(f"cannot move {source} to {target}: {err.strerror}") from err
        self._fsync_dir(dst.parent)
        self.effects.record(f"rename {source} {target}")

    def remove_tree(self, system_path: str) -> bool:
        """Remove a directory and everything in it (never following links), or a file;
        False when there was none."""
        self.check_writable(f"remove tree {system_path}")
        target = self.path(system_path, follow_last=False)
        if target.is_symlink() or target.is_file():  # a link goes, never its target
            os.unlink(target)
            self.effects.record(f"remove {system_path}")
            return True
        if not target.exists():
            return False
        # By absolute path, bottom up (not shutil.rmtree's dir_fd calls): every removal
        # stays visible to the test suite's side-effect guard.
        for here, dirs, files in os.walk(target, topdown=False):
            for name in files:
                os.unlink(os.path.join(here, name))
            for name in dirs:
                sub = os.path.join(here, name)
                if os.path.islink(sub):
                    os.unlink(sub)
                else:
                    os.rmdir(sub)
        os.rmdir(target)
        self.effects.record(f"remove tree {system_path}")
        return True

    def remove_stale_temp_files(self, system_dir: str) -> list[str]:
        """Remove the temp files `write_file` leaves behind when the process is killed
        between creating and renaming one (`.<name>.<8 random>.tmp`, regular files only);
        the names removed. Only safe while no other writer runs: under the node lock."""
        self.check_writable(f"clean temp files in {system_dir}")
        base = self.path(system_dir)
        removed: list[str] = []
        try:
            entries = list(os.scandir(base))
        except (FileNotFoundError, NotADirectoryError):
            return removed
        for entry in entries:
            if _TEMP_FILE.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed.append(entry.name)
                    self.effects.record(f"remove {system_dir.rstrip('/')}/{entry.name}")
        return removed
