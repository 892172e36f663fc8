"""The API client as the agent relies on it: verbs, TLS, retries, typed errors."""

from __future__ import annotations

import random
from typing import Any

import pytest
import requests

from agent.errors import Reason
from agent.kube.client import Client, resource_path
from agent.kube.errors import (
    AlreadyExists,
    APIError,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    ServerError,
    Unauthorized,
    Unreachable,
)
from agent.kube.kubeconfig import Credentials
from agent.retry import Backoff
from tests.unit.kube.fake_session import FakeSession, response, status

CREDS = Credentials("https://mgmt.example:6443", token="s3cr3t-token-value",
                    ca_file="/tmp/ca.crt")
MACHINE = resource_path("cluster.x-k8s.io", "v1beta2", "machines", namespace="default",
                        name="worker-0")


def client(*answers: Any, attempts: int = 4) -> tuple[Client, FakeSession, list[float]]:
    session = FakeSession(list(answers))
    slept: list[float] = []
    c = Client(CREDS, timeout=7.0, backoff=Backoff(0.5, 8.0, attempts), sleep=slept.append,
               session=session)  # type: ignore[arg-type]
    return c, session, slept


def test_paths_for_core_and_group_resources() -> None:
    assert MACHINE == "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines/worker-0"
    assert resource_path("", "v1", "secrets", namespace="ns", name="b") == \
        "/api/v1/namespaces/ns/secrets/b"
    assert resource_path("cluster.x-k8s.io", "v1beta2", "machines", namespace="d",
                         name="m", subresource="status").endswith("/machines/m/status")


def test_every_request_verifies_tls_has_a_timeout_and_ignores_the_environment() -> None:
    c, session, _ = client(response(200, {"kind": "Machine"}))
    assert c.get(MACHINE) == {"kind": "Machine"}
    sent = session.sent[0]
    assert session.trust_env is False
    assert sent.kwargs["verify"] == "/tmp/ca.crt"
    assert sent.kwargs["timeout"] == (7.0, 7.0)
    assert sent.headers["Authorization"] == "Bearer s3cr3t-token-value"
    assert sent.url == "https://mgmt.example:6443" + MACHINE


def test_server_side_apply_uses_the_agent_field_manager_and_apply_content_type() -> None:
    c, session, _ = client(response(200, {}))
    c.apply(MACHINE + "/status", {"status": {}}, force=True)
    sent = session.sent[0]
    assert sent.method == "PATCH"
    assert sent.headers["Content-Type"] == "application/apply-patch+yaml"
    assert sent.params == {"fieldManager": "machine-agent", "force": "true"}


def test_list_returns_items_and_the_version_to_watch_from() -> None:
    c, session, _ = client(response(200, {"items": [{"a": 1}],
                                          "metadata": {"resourceVersion": "42"}}))
    items, version = c.list("/x", label_selector="k=v")
    assert (items, version) == ([{"a": 1}], "42")
    assert session.sent[0].params == {"labelSelector": "k=v"}


def test_429_is_retried_after_the_delay_the_server_asked_for() -> None:
    c, session, slept = client(
        response(429, status(429, "TooManyRequests", "slow down"), {"Retry-After": "3"}),
        response(429, status(429, "TooManyRequests", "slow down"), {"Retry-After": "2"}),
        response(200, {"ok": True}))
    assert c.get(MACHINE) == {"ok": True}
    assert len(session.sent) == 3
    assert slept[0] >= 3 and slept[1] >= 2


def test_5xx_and_connection_errors_are_retried_with_jittered_backoff() -> None:
    c, _, slept = client(response(503, status(503, "ServiceUnavailable", "etcd down")),
                         requests.ConnectionError("refused"), response(200, {}))
    c.get(MACHINE)
    assert len(slept) == 2 and all(0 <= s <= 8.0 for s in slept)


def test_retries_run_out_with_a_temporary_management_unreachable_error() -> None:
    c, session, _ = client(*[requests.ConnectTimeout("timed out")] * 3, attempts=3)
    with pytest.raises(Unreachable) as err:
        c.get(MACHINE)
    assert err.value.temporary and err.value.reason == Reason.ManagementUnreachable
    assert "no answer from https://mgmt.example:6443" in err.value.message
    assert len(session.sent) == 3
    c, _, _ = client(*[response(500, status(500, "InternalError", "boom"))] * 3, attempts=3)
    with pytest.raises(ServerError, match="500 InternalError: boom"):
        c.get(MACHINE)


@pytest.mark.parametrize(("code", "reason", "cls", "agent_reason"), [
    (401, "Unauthorized", Unauthorized, Reason.ManagementUnauthorized),
    (403, "Forbidden", Forbidden, Reason.ManagementForbidden),
    (404, "NotFound", NotFound, Reason.InternalError),
    (409, "Conflict", Conflict, Reason.InternalError),
    (409, "AlreadyExists", AlreadyExists, Reason.InternalError),
])
def test_other_4xx_are_not_retried_and_carry_the_server_message(
        code: int, reason: str, cls: type[APIError], agent_reason: Reason) -> None:
    message = f'machines.cluster.x-k8s.io "worker-0" is {reason}'
    c, session, slept = client(response(code, status(code, reason, message)))
    with pytest.raises(cls) as err:
        c.get(MACHINE)
    assert len(session.sent) == 1 and slept == []
    assert message in str(err.value)
    assert err.value.reason == agent_reason
    assert not err.value.temporary


def test_invalid_carries_each_cause_with_its_field() -> None:
    c, _, _ = client(response(422, status(
        422, "Invalid", 'IPAddressClaim.ipam.cluster.x-k8s.io "c" is invalid',
        [{"reason": "FieldValueRequired", "message": "Required value",
          "field": "spec.poolRef.apiGroup"}])))
    with pytest.raises(Invalid) as err:
        c.create("/x", {})
    assert err.value.causes[0].field == "spec.poolRef.apiGroup"
    assert "spec.poolRef.apiGroup: Required value" in str(err.value)


def test_field_manager_conflict_is_recognised() -> None:
    c, _, _ = client(response(409, status(409, "Conflict", "Apply failed with 1 conflict",
                                          [{"reason": "FieldManagerConflict",
                                            "message": 'conflict with "capi"',
                                            "field": ".status.conditions"}])))
    with pytest.raises(Conflict) as err:
        c.apply(MACHINE, {})
    assert [c.reason for c in err.value.causes] == ["FieldManagerConflict"]


def test_the_token_never_reaches_an_error_message() -> None:
    c, _, _ = client(*[requests.ConnectionError("refused")] * 2, attempts=2)
    with pytest.raises(Unreachable) as err:
        c.get(MACHINE)
    assert "s3cr3t" not in str(err.value)


def test_backoff_jitter_stays_below_its_ceiling() -> None:
    rng = random.Random(1)
    b = Backoff(0.5, 8.0, 10)
    assert all(0 <= b.delay(n, rng) <= min(8.0, 0.5 * 2 ** n) for n in range(10))


def test_after_a_long_outage_the_pauses_grow_with_it_so_a_fleet_comes_back_spread_out(
        ) -> None:
    """While the server has not answered for a minute, a retry's pause is drawn from up
    to a minute (OUTAGE_CAP), not from the call's own short ceiling: a fleet held up by
    an outage comes back over a minute instead of within the first seconds."""
    random.seed(27)
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    down = FakeSession([requests.ConnectionError("refused")] * 400)
    c = Client(CREDS, backoff=Backoff(0.25, 10.0, 6), sleep=sleep,
               session=down, monotonic=lambda: now[0])  # type: ignore[arg-type]
    while now[0] < 60.0:  # the phase calls again and again through a 60 s outage
        with pytest.raises(Unreachable):
            c.get(MACHINE)
        now[0] += 1.0
    assert c.unanswered_since == 0.0
    late = []
    for _ in range(40):  # later calls, with the server still down
        with pytest.raises(Unreachable):
            c.get(MACHINE)
        late.extend(slept[-5:])
    assert max(late) > 30.0  # spread over the minute, not within the first 10 s
    assert max(late) <= 60.0  # never longer than OUTAGE_CAP
    # one answer ends the streak: the next failure starts from the short pauses again
    answered = FakeSession([response(200, {}), requests.ConnectionError("refused"),
                            response(200, {})])
    c.session = answered
    c.get(MACHINE)
    assert c.unanswered_since is None
    before = len(slept)
    c.get(MACHINE)
    assert slept[before:] and max(slept[before:]) <= 0.25
