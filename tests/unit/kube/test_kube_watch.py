"""Waiting through list + watch: bookmarks, closed watches, 410 Gone in both forms."""

from __future__ import annotations

from typing import Any

import pytest

from agent.errors import TemporaryError
from agent.kube.client import Client
from agent.kube.kubeconfig import Credentials
from agent.kube.watch import Watcher
from agent.retry import Backoff
from tests.unit.kube.fake_session import FakeSession, response, status

PATH = "/api/v1/namespaces/default/secrets"


def obj(name: str, rv: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}, **extra}


def watcher(*answers: Any) -> tuple[Watcher, FakeSession]:
    session = FakeSession(list(answers))
    c = Client(Credentials("https://mgmt:6443"), backoff=Backoff(0.1, 1, 3),
               sleep=lambda s: None, session=session)  # type: ignore[arg-type]
    return Watcher(c, PATH, field_selector="metadata.name=b", monotonic=lambda: 0.0), session


def is_b(o: dict[str, Any]) -> bool:
    return bool(o["metadata"]["name"] == "b")


def test_an_existing_object_is_found_by_the_list_alone() -> None:
    w, session = watcher(response(200, {"items": [obj("b", "5")],
                                        "metadata": {"resourceVersion": "5"}}))
    assert w.until(is_b, 10, "b")["metadata"]["resourceVersion"] == "5"
    assert len(session.sent) == 1


def test_bookmarks_and_closed_watches_resume_from_the_last_version() -> None:
    w, session = watcher(
        response(200, {"items": [], "metadata": {"resourceVersion": "5"}}),
        response(200, lines=[{"type": "ADDED", "object": obj("a", "6")},
                             {"type": "BOOKMARK", "object": obj("", "9")}]),
        response(200, lines=[{"type": "ADDED", "object": obj("b", "10")}]))
    assert w.until(is_b, 10, "b")["metadata"]["resourceVersion"] == "10"
    first, second = session.sent[1].params, session.sent[2].params
    assert first["resourceVersion"] == "5" and first["allowWatchBookmarks"] == "true"
    assert first["fieldSelector"] == "metadata.name=b" and first["watch"] == "true"
    assert second["resourceVersion"] == "9"
    assert w.stats.bookmarks == 1 and w.stats.watches == 2


@pytest.mark.parametrize("gone", [
    response(200, lines=[{"type": "ERROR", "object": status(410, "Expired", "too old")}]),
    response(410, status(410, "Expired", "too old resource version: 5 (99)")),
], ids=["200-then-ERROR", "HTTP-410"])
def test_410_gone_lists_again(gone: Any) -> None:
    w, session = watcher(
        response(200, {"items": [], "metadata": {"resourceVersion": "5"}}), gone,
        response(200, {"items": [], "metadata": {"resourceVersion": "100"}}),
        response(200, lines=[{"type": "ADDED", "object": obj("b", "101")}]))
    assert w.until(is_b, 10, "b")["metadata"]["resourceVersion"] == "101"
    assert w.stats.relists_on_gone == 1
    assert session.sent[3].params["resourceVersion"] == "100"


def test_the_wait_is_bounded_by_its_deadline() -> None:
    clock = iter([0.0, 11.0])
    w, _ = watcher(response(200, {"items": [], "metadata": {"resourceVersion": "5"}}),
                   response(200, lines=[]))
    w.monotonic = lambda: next(clock)
    with pytest.raises(TemporaryError, match="timed out waiting for the Secret"):
        w.until(is_b, 10, "the Secret")
