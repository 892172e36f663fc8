"""A credential that expires never holds a deletion for ever: before a JWT bearer token
expires (EXPIRY_MARGIN), unless the token file holds a rotated one, the daemon takes its
pre-terminate hook off while the credential still works and says so on the Machine; a
rotated token puts the hook back on."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agent.daemon import delete_lifecycle
from agent.daemon.deletion import EXPIRY_MARGIN, hook_release_due, token_expiry
from agent.daemon.service import Daemon
from agent.host import Host
from agent.kube.kubeconfig import Credentials
from agent.report import Conditions

NOW = dt.datetime(2026, 12, 3, 16, 0, tzinfo=dt.UTC)


def jwt(expires: dt.datetime) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part({'exp': int(expires.timestamp())})}.sig"


def test_a_service_account_tokens_expiry_is_read_and_an_opaque_token_has_none() -> None:
    expires = NOW + dt.timedelta(hours=1)
    assert token_expiry(jwt(expires)) == expires
    assert token_expiry("abcdef.0123456789abcdef") is None
    assert token_expiry("a.!!!.c") is None and token_expiry(None) is None


def test_the_release_is_due_before_expiry_and_moves_with_a_rotated_token_file(
        tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(jwt(NOW + dt.timedelta(hours=1)))
    creds = Credentials("https://192.0.2.1:6443", token="old", token_file=str(token_file))
    assert hook_release_due(creds) == NOW + dt.timedelta(hours=1, seconds=-EXPIRY_MARGIN)
    token_file.write_text(jwt(NOW + dt.timedelta(hours=5)))  # projected again
    assert hook_release_due(creds) == NOW + dt.timedelta(hours=5, seconds=-EXPIRY_MARGIN)


class FixedClock:
    def __init__(self, now: dt.datetime) -> None:
        self.at = now

    def now(self) -> dt.datetime:
        return self.at


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    host = Host(tmp_path / "root")
    clock = FixedClock(NOW)
    monkeypatch.setattr(host, "clock", clock)
    the_daemon = Daemon(host)
    token_file = tmp_path / "token"
    the_daemon.session = SimpleNamespace(client=SimpleNamespace(creds=Credentials(
        "https://192.0.2.1:6443", token_file=str(token_file))))
    published: list[bool] = []
    the_daemon.orchestrator = SimpleNamespace(conditions=Conditions(host, []),
                                              reporters=[SimpleNamespace(
                                                  publish=lambda c, final: published.append(
                                                      final))])
    hooks: list[bool] = []
    monkeypatch.setattr(the_daemon.deleting, "hold", lambda held: hooks.append(held) or True)
    timers: list[float] = []
    monkeypatch.setattr(the_daemon.deleting, "check_credential_in", timers.append)
    return SimpleNamespace(daemon=the_daemon, token_file=token_file, clock=clock,
                           hooks=hooks, timers=timers)


def test_an_expiring_credential_takes_the_hook_off_and_a_rotated_one_puts_it_back(
        daemon: Any) -> None:
    assert delete_lifecycle.CREDENTIAL_RECHECK > 0
    daemon.token_file.write_text(jwt(NOW + dt.timedelta(hours=1)))
    daemon.daemon.deleting.check_credential()
    assert daemon.hooks == [] and daemon.timers == [3600 - EXPIRY_MARGIN]  # not yet
    daemon.clock.at = NOW + dt.timedelta(minutes=55)  # the timer fired; not rotated
    daemon.daemon.deleting.check_credential()
    assert daemon.hooks == [False]  # taken off while the credential still works
    said = daemon.daemon.orchestrator.conditions.get("NodeCleanedUp")
    assert (said.status, said.reason) == ("False", "CredentialExpiring")
    assert "was not rotated: the pre-terminate hook" in said.message
    daemon.daemon.deleting.check_credential()  # checked again later: nothing more to do
    assert daemon.hooks == [False]
    daemon.token_file.write_text(jwt(NOW + dt.timedelta(hours=3)))  # rotated at last
    daemon.daemon.deleting.check_credential()
    assert daemon.hooks == [False, True]


def test_an_opaque_token_sets_no_timer(daemon: Any) -> None:
    daemon.token_file.write_text("abcdef.0123456789abcdef")
    daemon.daemon.deleting.check_credential()
    assert daemon.hooks == [] and daemon.timers == []
