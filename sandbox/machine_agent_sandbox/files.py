"""Writing a file that another process waits for: it appears whole or not at all.

A reader that polls for a path (the stand-in's admin.kubeconfig, a relay's ready file)
would otherwise see it between open() and the last write(), empty or cut, under load."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: str | bytes, *, mode: int = 0o644) -> None:
    """Write `data` to a temp file beside `path`, flush it to disk and rename it over
    `path` (rename within one directory is atomic on POSIX)."""
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(raw)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
