"""The daemon's start, as `status --wait` sees it: the outcome left in the status file
(it outlives a reboot) stops being final before the session is opened, which can take
minutes (cloud-init, the bootstrap data), so --wait waits for this run's outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.daemon import Daemon
from agent.errors import ConfigError, FieldError
from agent.host import Host
from agent.orchestrator import EXIT_USAGE
from agent.report import SUMMARY, Conditions, LocalStatus, read_status


def test_the_last_outcome_is_no_longer_final_while_the_session_opens(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = Host(tmp_path)
    last = Conditions(host, ["NetworkReady"])
    last.set(SUMMARY, "True", "Bootstrapped", "all phases completed")  # type: ignore[arg-type]
    LocalStatus(host).publish(last.all(), final=True)  # the boot before's outcome
    seen: list[bool] = []

    def opening(host: Host, files: Any, **options: Any) -> None:
        status = read_status(host)
        assert status is not None
        seen.append(status[1])
        raise ConfigError([FieldError("spec.tme", "unknown field", origin="a.yaml")])

    monkeypatch.setattr("agent.session.open_session", opening)
    assert Daemon(host).run() == EXIT_USAGE
    assert seen == [False]
    conditions, final = read_status(host) or ([], False)
    assert final and {c.type: c.reason for c in conditions}[SUMMARY] == "ConfigInvalid"
