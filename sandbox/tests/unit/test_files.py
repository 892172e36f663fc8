"""Files one sandbox process writes and another waits for appear whole or not at all."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from machine_agent_sandbox.files import write_atomic


def test_a_reader_polling_for_the_file_never_sees_it_empty_or_cut(tmp_path: Path) -> None:
    """As sandbox cluster.py polls for the stand-in's admin.kubeconfig: rewritten many
    times while a reader reads whatever is there, every read is the whole file (a plain
    write_text is seen empty, between its truncating open and its write)."""
    target = tmp_path / "admin.kubeconfig"
    text = "users:\n- user:\n    token: " + "x" * 200_000 + "\n"
    seen: list[int] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            if target.exists():
                seen.append(len(target.read_text()))

    thread = threading.Thread(target=reader)
    thread.start()
    deadline = time.monotonic() + 10
    try:
        for _ in range(300):  # bounded: rewrites while the reader reads
            if time.monotonic() > deadline:
                break
            write_atomic(target, text, mode=0o600)
    finally:
        stop.set()
        thread.join()
    assert seen, "the reader never saw the file"
    assert set(seen) == {len(text)}
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["admin.kubeconfig"]  # no temp files left
