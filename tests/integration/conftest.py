"""Fixtures every integration suite shares: the management API stand-in, or nothing when
MACHINE_AGENT_TEST_KUBECONFIG points the suites at a real API server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from machine_agent_sandbox.apiserver import ApiServer

REAL_KUBECONFIG = os.environ.get("MACHINE_AGENT_TEST_KUBECONFIG", "")


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[ApiServer | None]:
    """The running stand-in; None against a real server."""
    if REAL_KUBECONFIG:
        yield None
        return
    with ApiServer(tmp_path / "apiserver", bookmark_interval=0.2) as server:
        yield server
