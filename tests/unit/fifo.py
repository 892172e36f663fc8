"""A bound for tests of reads that must not wait on a FIFO: the call runs in a thread; if
it still waits after the bound, the FIFO's other end is opened to release it and the test
fails (so the agent's old behaviour, a hang, fails instead of holding the suite up)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest


def make_fifo(root: Path, path: str) -> Path:
    at = root / path.lstrip("/")
    at.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(at)
    return at


def raised_within(seconds: float, fifo: Path, call: Callable[[], object]
                  ) -> BaseException | None:
    """What `call` raised (None when it returned), within `seconds`."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            raised.append(None)
        except Exception as err:
            raised.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail(f"still reading the FIFO {fifo} after {seconds}s")
    return raised[0]
