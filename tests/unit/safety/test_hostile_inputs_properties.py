"""Property tests: whatever Ignition, the kubeadm config bootstrap data carries, an API
answer or the journal holds, the agent either reads it or says why in its own error
(an AgentError), never a traceback of another kind. Small budgets, for CI."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machine_agent_sandbox.testkit.bootstrap import Flavour
from machine_agent_sandbox.testkit.bootstrap import cabpk_ignition as ignition
from requests.structures import CaseInsensitiveDict

from agent.errors import AgentError
from agent.host import Host
from agent.kube.client import Client
from agent.kube.kubeconfig import Credentials
from agent.phases.join.ignition import parse_ignition
from agent.phases.join.joinconfig import read_kubeadm_configuration
from agent.retry import Backoff
from agent.state import JOURNAL, Journal
from tests.unit.kube.fake_session import FakeSession

BUDGET = settings(max_examples=60, deadline=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture])

SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                   st.text(max_size=12),
                   st.sampled_from(["2.3.0", "3.4.0", "kubeadm.service", "/etc/kubeadm.sh",
                                    "data:,x", "data:;base64,H4sI", "gzip", "root",
                                    "https://x", "sha512-00", "a\nb\x1b[31m"]))
KEYS = st.sampled_from(["ignition", "version", "storage", "files", "systemd", "units",
                        "passwd", "path", "contents", "source", "compression", "mode",
                        "name", "enabled", "user", "group", "verification", "hash",
                        "filesystem", "append", "id", "x"])
JSONISH = st.recursive(SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=5)), max_leaves=30)

VALID = json.loads(ignition(Flavour("join", "apiVersion: kubeadm.k8s.io/v1beta4\n"
                                            "kind: JoinConfiguration\n")))


def read_or_refused(call: Callable[[], object]) -> None:
    """`call` reads its input, or refuses it with the agent's own error, which says why
    (any other exception fails the test)."""
    try:
        call()
    except AgentError as err:
        assert err.message.strip()


def _set(doc: Any, path: list[Any], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


@BUDGET
@given(doc=JSONISH)
def test_any_json_as_ignition_is_read_or_refused_by_name(doc: Any) -> None:
    read_or_refused(lambda: parse_ignition(json.dumps(doc)))


SPOTS = [["ignition"], ["ignition", "version"], ["storage"], ["storage", "files"],
         ["storage", "files", 0], ["storage", "files", 0, "contents"],
         ["storage", "files", 0, "contents", "source"], ["storage", "files", 0, "mode"],
         ["storage", "files", 0, "path"], ["systemd", "units", 0], ["systemd", "units"],
         ["storage", "files", 1, "contents", "compression"], ["passwd"]]


@BUDGET
@given(spot=st.sampled_from(SPOTS), value=JSONISH)
def test_cabpks_ignition_with_any_part_replaced_is_read_or_refused_by_name(
        spot: list[Any], value: Any) -> None:
    doc = json.loads(json.dumps(VALID))
    _set(doc, spot, value)
    read_or_refused(lambda: parse_ignition(json.dumps(doc)))


YAML_PIECES = st.sampled_from([
    "apiVersion: kubeadm.k8s.io/v1beta4\n", "kind: JoinConfiguration\n", "---\n",
    "kind: InitConfiguration\n", "nodeRegistration:\n", "  name: worker-0\n",
    "  kubeletExtraArgs:\n", "  - name: node-ip\n    value: 192.0.2.1\n", "a: &x [1]\n",
    "b: *x\n", "discovery: {bootstrapToken: {token: abcdef.0123456789abcdef}}\n",
    "taints: [{key: a, effect: NoSchedule}]\n", "[[[[[[\n", "{x: y\n", "- - -\n",
    "\t\x00\n", "name: \"\\x1b[31m\"\n", "apiVersion: 7\n", "!!python/object:os.system\n"])


@BUDGET
@given(pieces=st.lists(YAML_PIECES, max_size=12), command=st.sampled_from(["join", "init"]))
def test_any_kubeadm_config_in_bootstrap_data_is_read_or_refused_by_name(
        pieces: list[str], command: str) -> None:
    read_or_refused(lambda: read_kubeadm_configuration("".join(pieces), command))


@BUDGET
@given(text=st.text(max_size=300))
def test_any_text_as_a_kubeadm_config_is_read_or_refused_by_name(text: str) -> None:
    read_or_refused(lambda: read_kubeadm_configuration(text, "join"))


def _answer(code: int, body: bytes, content_type: str | None) -> requests.Response:
    r = requests.Response()
    r.status_code = code
    r._content = body
    r._content_consumed = True  # type: ignore[attr-defined]
    r.headers = CaseInsensitiveDict({"Content-Type": content_type} if content_type else {})
    return r


BODIES = st.one_of(st.binary(max_size=200), JSONISH.map(lambda d: json.dumps(d).encode()),
                   st.integers(0, 3000).map(lambda n: b"[" * n + b"]" * n),
                   st.just(b"[" * 5000))


@BUDGET
@given(code=st.sampled_from([200, 201, 204, 301, 302, 304, 400, 401, 403, 404, 409, 410,
                             422, 429, 500, 503, 504]),
       body=BODIES, content_type=st.sampled_from([None, "application/json", "text/html"]))
def test_any_api_answer_is_an_object_or_the_clients_own_error(
        code: int, body: bytes, content_type: str | None) -> None:
    session = FakeSession([_answer(code, body, content_type)] * 2)
    client = Client(Credentials("https://mgmt:6443", token="t"),
                    backoff=Backoff(0.01, 0.01, 2), sleep=lambda s: None,
                    session=session)  # type: ignore[arg-type]
    try:
        answer = client.get("/apis/cluster.x-k8s.io/v1beta2/namespaces/a/machines/b")
    except AgentError:
        return
    assert isinstance(answer, dict)


@BUDGET
@given(content=st.one_of(st.binary(max_size=300),
                         JSONISH.map(lambda d: json.dumps({"phases": d}).encode()),
                         st.integers(0, 5000).map(lambda n: b"[" * n)))
def test_any_journal_on_disk_is_read_or_refused_as_state(tmp_path: Path,
                                                         content: bytes) -> None:
    path = tmp_path / JOURNAL.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    read_or_refused(lambda: Journal.load(Host(tmp_path)))
