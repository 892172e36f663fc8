"""The Machine reporter and reader against a scripted API: coalescing, limits, shapes,
and the identity errors a user can meet."""

from __future__ import annotations

import base64
import random
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from agent.config.identity import DiscoverySpec, IdentitySpec, MachineRef
from agent.errors import FieldError, PermanentError, Reason
from agent.host import Host
from agent.kube.client import Client
from agent.kube.facts import MachineFacts
from agent.kube.kubeconfig import Credentials
from agent.kube.machine import MachineReader, MachineView
from agent.kube.machine_config import ManagementSource
from agent.kube.reporter import MachineReporter, Reports
from agent.report import Condition
from agent.retry import Backoff
from agent.state import Journal
from tests.unit.kube.fake_session import FakeSession, response, status

FACTS = MachineFacts("default", "worker-0", "uid-1", "c1")


def client(session: FakeSession) -> Client:
    return Client(Credentials("https://mgmt:6443"), backoff=Backoff(0.01, 0.01, 2),
                  sleep=lambda s: None, session=session)  # type: ignore[arg-type]


def cond(kind: str, status: str = "True", reason: str = "NetworkConfigured",
         message: str = "ok") -> Condition:
    return Condition(kind, status, reason, message, "2026-01-01T00:00:00Z")  # type: ignore[arg-type]


def reporter(tmp_path: Path, session: FakeSession, version: str = "v1beta2"
             ) -> tuple[MachineReporter, Journal]:
    host = Host(tmp_path)
    journal = Journal(host)
    view = MachineView(FACTS, version, 3, None)
    return MachineReporter(client(session), view, journal, host=host, interval=0,
                           final_attempts=1), journal


def test_status_is_applied_with_observed_generation_and_messages_clipped_in_bytes(
        tmp_path: Path) -> None:
    session = FakeSession([response(200), response(201)])
    rep, _ = reporter(tmp_path, session)
    rep.publish([cond("NetworkReady", message="é" * 8000)], final=True)
    applied = session.sent[0]
    assert applied.url.endswith("/apis/cluster.x-k8s.io/v1beta2/namespaces/default/"
                                "machines/worker-0/status")
    (entry,) = applied.body["status"]["conditions"]
    assert entry["observedGeneration"] == 3
    assert len(entry["message"].encode()) <= 10240
    assert session.sent[1].body["regarding"]["uid"] == "uid-1"


def test_status_is_a_forced_apply_under_the_agents_manager_without_a_resource_version(
        tmp_path: Path) -> None:
    """Forced, and not pinned to a version: a concurrent writer (another manager on the
    same condition types, any update of the Machine) can never make the report 409."""
    session = FakeSession([response(200), response(201)])
    rep, _ = reporter(tmp_path, session)
    rep.publish([cond("NetworkReady")], final=True)
    applied = session.sent[0]
    assert applied.method == "PATCH"
    assert applied.headers["Content-Type"] == "application/apply-patch+yaml"
    assert applied.params == {"fieldManager": "machine-agent", "force": "true"}
    assert "resourceVersion" not in applied.body["metadata"]


def test_each_write_to_the_machine_is_a_side_effect_counted_once_it_is_made(
        tmp_path: Path) -> None:
    """The crash harness kills the agent right after a counted side effect: the status
    apply and each Event created are ones; an Event the server already has is none, nor
    is a write the server refused."""
    session = FakeSession([response(500), response(200), response(201),
                           response(409, status(409, "AlreadyExists", "exists"))])
    rep, _ = reporter(tmp_path, session)

    def remote() -> list[str]:
        return [e for e in rep.host.effects.recent if not e.startswith("write ")]  # journal

    rep.publish([cond("NetworkReady")], final=True)  # the apply fails: nothing made
    assert remote() == []
    rep.publish([cond("NetworkReady"), cond("TimeSynchronized", reason="TimeSynchronized")],
                final=True)
    (first, second) = [e["metadata"]["name"] for e in (s.body for s in session.sent[2:])]
    assert remote() == ["apply Machine default/worker-0 status", f"create Event {first}"]
    assert second != first


def test_v1beta1_machines_get_the_conditions_under_status_v1beta2(tmp_path: Path) -> None:
    session = FakeSession([response(200), response(201)])
    rep, _ = reporter(tmp_path, session, version="v1beta1")
    rep.publish([cond("NetworkReady")], final=True)
    assert "conditions" in session.sent[0].body["status"]["v1beta2"]


def test_unreachable_reports_are_coalesced_in_the_journal(tmp_path: Path) -> None:
    import requests

    session = FakeSession([requests.ConnectionError("refused")])
    rep, journal = reporter(tmp_path, session)
    rep.backoff = Pause(60, 60, 8)  # the retry after the failure is not due in this test
    rep.publish([cond("NetworkReady", "Unknown", "InProgress", "running")], final=False)
    rep.publish([cond("NetworkReady", "Unknown", "InProgress", "still running")],
                final=False)  # within the backoff: not even tried
    rep.close()
    assert len(session.sent) == 1
    saved = Journal.load(Host(tmp_path)).stored[Reports.KEY]
    assert saved["dirty"] and saved["conditions"]["NetworkReady"]["message"] == \
        "still running"
    assert saved["events"] == []  # Unknown is not a transition worth an Event
    assert journal is rep.journal


def test_an_event_is_sent_once_per_transition_and_a_refused_one_is_dropped(
        tmp_path: Path) -> None:
    session = FakeSession([response(200),
                           response(403, status(403, "Forbidden", "cannot create events"))])
    rep, _ = reporter(tmp_path, session)
    rep.publish([cond("NetworkReady")], final=True)
    assert not rep.pending
    rep.publish([cond("NetworkReady")], final=True)  # same state: no request at all
    assert len(session.sent) == 2


def machine(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": "u", "generation": 1},
            "spec": {"clusterName": "c1", **spec}}


def reader(tmp_path: Path, *answers: Any) -> MachineReader:
    return MachineReader(client(FakeSession(list(answers))), Host(tmp_path), wait=0)


def test_two_machines_with_this_uuid_are_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "sys/class/dmi/id").mkdir(parents=True)
    uuid = "4c4c4544-0042-3510-8051-b7c04f565a31"
    (tmp_path / "sys/class/dmi/id/product_uuid").write_text(uuid.upper() + "\n")
    r = reader(tmp_path, response(200, {"items": [machine("a"), machine("b")]}))
    with pytest.raises(PermanentError) as err:
        r.read(IdentitySpec(discovery=DiscoverySpec(namespace="default")))
    assert err.value.reason == Reason.MachineNotFound
    assert f"label machine-agent.io/host-uuid={uuid}" in str(err.value)
    assert "2 match (default/a, default/b)" in str(err.value)


def test_a_cluster_serving_only_v1beta1_is_read_with_it(tmp_path: Path) -> None:
    r = reader(tmp_path, response(404, status(404, "NotFound", "the server could not find "
                                              "the requested resource")),
               response(200, machine("worker-0")),
               response(200, {"spec": {"controlPlaneEndpoint": {"host": "2001:db8::1",
                                                                "port": 6443}}}))
    view = r.read(IdentitySpec(machine=MachineRef("worker-0")))
    assert view.version == "v1beta1"
    assert view.facts.control_plane_endpoint == "[2001:db8::1]:6443"
    assert view.status_path.endswith("/v1beta1/namespaces/default/machines/worker-0/status")


def test_a_named_machine_that_does_not_exist_is_machine_not_found(tmp_path: Path) -> None:
    gone = response(404, status(404, "NotFound",
                                'machines.cluster.x-k8s.io "worker-9" not found'))
    r = reader(tmp_path, gone, response(404, status(404, "NotFound", "not found")))
    with pytest.raises(PermanentError, match='"worker-9" not found') as err:
        r.read(IdentitySpec(machine=MachineRef("worker-9")))
    assert err.value.reason == Reason.MachineNotFound


def test_a_secret_config_is_decoded_and_may_not_set_local_only_sections(
        tmp_path: Path) -> None:
    text = ("apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"
            "spec:\n  management: {server: 'https://evil:6443'}\n")
    r = reader(tmp_path, response(200, {"metadata": {
        "name": "w", "namespace": "default", "annotations": {
            "machine-agent.io/config": "secret/w-agent"}}, "spec": {}}),
        response(200, {"data": {"config.yaml": base64.b64encode(text.encode()).decode()}}))
    view = r.read(IdentitySpec(machine=MachineRef("w")))
    assert view.config is not None and view.config.origin == "secret default/w-agent"
    errors: list[FieldError] = []
    view.config.fragments(Host(tmp_path), errors)
    assert [str(e) for e in errors] == [
        "secret default/w-agent: spec.management: cannot come from the management cluster "
        "(set it in /etc/machine-agent/config.yaml on the node)"]


def test_a_malformed_config_annotation_is_a_config_error() -> None:
    errors: list[FieldError] = []
    ManagementSource("machine default/w annotation machine-agent.io/config",
                     problem="'cm/x' is not configmap/NAME or secret/NAME").fragments(
        Host("/", read_only=True), errors)
    assert "is not configmap/NAME or secret/NAME" in str(errors[0])


class Pause(Backoff):
    """A backoff without jitter: the pause given, whatever the attempt."""

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        return self.base


def daemons_reporter(tmp_path: Path, session: FakeSession, pause: float
                     ) -> MachineReporter:
    """The daemon's reporter: the final report tried once, then in the background."""
    host = Host(tmp_path)
    return MachineReporter(client(session), MachineView(FACTS, "v1beta2", 3, None),
                           Journal(host), host=host, interval=0,
                           backoff=Pause(pause, pause, 8), final_attempts=1,
                           keep_trying=True)


@pytest.mark.parametrize("pause", [0.0, 0.01])
def test_the_daemons_final_status_is_retried_in_the_background_until_delivered(
        tmp_path: Path, pause: float) -> None:
    # An outage that outlasts several tries must not leave the final status undelivered
    # while nothing else is published. A pause of 0: each retry is due at once, so the
    # try made right after a failure must itself schedule the next one.
    down = requests.ConnectionError("connection refused")
    session = FakeSession([down, down, down, response(200), response(201)])
    rep = daemons_reporter(tmp_path, session, pause)
    try:
        rep.publish([cond("NetworkReady")], final=True)
        for _ in range(1000):  # bounded: 10 s at least
            if not rep.pending:
                break
            time.sleep(0.01)
    finally:
        rep.close()
    assert not rep.pending
    assert [s.method for s in session.sent] == ["PATCH"] * 4 + ["POST"]
    (entry,) = session.sent[3].body["status"]["conditions"]
    assert (entry["type"], entry["status"]) == ("NetworkReady", "True")


def test_a_closed_reporter_sends_nothing_more(tmp_path: Path) -> None:
    # The daemon closes a run's reporter and makes the next one on the same journal: a
    # retry left over from the first must not send beside the second, even one whose
    # timer fired while close() was on its way (it waits for the reporter's lock).
    down = requests.ConnectionError("connection refused")
    session = FakeSession([down])
    rep = daemons_reporter(tmp_path, session, 0.5)
    with rep._lock:  # the timer fires meanwhile and waits for the lock
        rep.publish([cond("NetworkReady")], final=True)
        time.sleep(1.0)
        rep.close()
    time.sleep(0.2)
    assert len(session.sent) == 1
    assert rep.pending


def test_a_progress_report_delivered_at_once_is_not_written_to_disk_on_its_own(
        tmp_path: Path) -> None:
    # The orchestrator's next journal save carries it; a final report is written.
    session = FakeSession([response(200), response(200), response(201)])
    rep, _ = reporter(tmp_path, session)
    rep.publish([cond("NetworkReady", "Unknown", "InProgress", "running")], final=False)
    assert not rep.pending
    assert not (tmp_path / "var/lib/machine-agent/journal.json").exists()
    rep.publish([cond("NetworkReady")], final=True)
    assert not rep.pending
    saved = Journal.load(Host(tmp_path)).section(Reports)
    assert saved.conditions["NetworkReady"]["status"] == "True"
