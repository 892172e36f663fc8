"""Files one sandbox process writes and another waits for appear whole or not at all."""

from __future__ import annotations

import threading
from pathlib import Path

from machine_agent_sandbox.files import write_atomic


def test_a_reader_polling_for_the_file_never_sees_it_empty_or_cut(tmp_path: Path) -> None:
    target = tmp_path / "admin.kubeconfig"
    text = "users:\n- user:\n    token: " + "x" * 200_000 + "\n"
    seen: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            if target.exists():
                seen.append(target.read_text())

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(50):
            target.unlink(missing_ok=True)
            write_atomic(target, text, mode=0o600)
    finally:
        stop.set()
        thread.join()
    assert seen, "the reader never saw the file"
    assert {len(s) for s in seen} == {len(text)}
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["admin.kubeconfig"]  # no temp files left
