"""The management token is read from its file once per refusal, with a bound, and checked
before it reaches a header: an error names the file, never the token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from agent.config.management import ManagementSpec
from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.kube.client import Client, resource_path
from agent.kube.errors import Unauthorized
from agent.kube.kubeconfig import load_credentials
from agent.retry import Backoff
from tests.unit.fifo import make_fifo, raised_within
from tests.unit.kube.fake_session import FakeSession, response, status

SECRET = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXZhbHVl.c2lnbmF0dXJl"
MACHINE = resource_path("cluster.x-k8s.io", "v1beta2", "machines", namespace="default",
                        name="worker-0")


def spec(tmp_path: Path, token: str | bytes) -> ManagementSpec:
    path = tmp_path / "etc/token"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(token.encode() if isinstance(token, str) else token)
    return ManagementSpec(server="https://mgmt.example:6443", token_file="/etc/token")


@pytest.mark.parametrize("token", [f"{SECRET}\nsecond-line", f"{SECRET} trailing words",
                                   f"{SECRET}\x1b[2J", ""])
def test_a_token_file_not_holding_one_token_is_refused_naming_the_file(
        tmp_path: Path, token: str) -> None:
    with pytest.raises(PermanentError) as err:
        load_credentials(spec(tmp_path, token), Host(tmp_path))
    assert err.value.reason == Reason.ConfigInvalid
    assert "the token in /etc/token " in str(err.value)
    assert SECRET not in str(err.value) and "second-line" not in str(err.value)


def test_a_token_file_that_is_a_fifo_is_refused_without_waiting_for_a_writer(
        tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path, "/etc/token")
    err = raised_within(10, fifo, lambda: load_credentials(
        ManagementSpec(server="https://mgmt.example:6443", token_file="/etc/token"),
        Host(tmp_path)))
    assert isinstance(err, PermanentError)
    assert "cannot read /etc/token: is a FIFO, not a regular file" in str(err)


class RotatingEveryRead(FakeSession):
    """A server refusing every token while the token file changes at every request."""

    def __init__(self, token_file: Path) -> None:
        super().__init__()
        self.token_file = token_file

    def request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        self.answers.append(response(401, status(401, "Unauthorized", "Unauthorized")))
        self.token_file.write_text(f"token-{len(self.sent)}\n")
        return super().request(method, url, **kwargs)


def test_a_refused_token_is_read_again_once_per_request_not_without_end(
        tmp_path: Path) -> None:
    creds = load_credentials(spec(tmp_path, "first-token"), Host(tmp_path))
    session = RotatingEveryRead(tmp_path / "etc/token")
    c = Client(creds, timeout=5.0, backoff=Backoff(0.1, 1.0, 1), sleep=lambda _: None,
               session=session)  # type: ignore[arg-type]
    with pytest.raises(Unauthorized):
        c.get(MACHINE)
    assert [s.headers["Authorization"] for s in session.sent] == \
        ["Bearer first-token", "Bearer token-0"]


def test_a_token_file_rewritten_with_a_bad_token_keeps_the_header_clean(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    creds = load_credentials(spec(tmp_path, "first-token"), Host(tmp_path))
    (tmp_path / "etc/token").write_text(f"{SECRET}\nBearer injected\n")
    session = FakeSession([response(401, status(401, "Unauthorized", "Unauthorized"))])
    c = Client(creds, timeout=5.0, backoff=Backoff(0.1, 1.0, 1), sleep=lambda _: None,
               session=session)  # type: ignore[arg-type]
    with pytest.raises(Unauthorized) as err:
        c.get(MACHINE)
    assert len(session.sent) == 1
    assert SECRET not in str(err.value) and SECRET not in caplog.text
    assert f"the token in {tmp_path}/etc/token is not a bearer token" in caplog.text


def test_a_workload_kubeconfig_token_of_two_lines_is_refused_naming_the_file(
        tmp_path: Path) -> None:
    from agent.kube.workload import KubeconfigCluster

    (tmp_path / "etc/kubernetes").mkdir(parents=True)
    (tmp_path / "etc/kubernetes/kubelet.conf").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://192.0.2.10:6443'}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
        f"users: [{{name: u, user: {{token: \"{SECRET}\\nX-Injected: 1\"}}}}]\n")
    with pytest.raises(PermanentError) as err:
        KubeconfigCluster(Host(tmp_path), "/etc/kubernetes/kubelet.conf",
                          reason=Reason.CNIBroken, missing_hint="join first")
    assert "the token in /etc/kubernetes/kubelet.conf is not a bearer token" in str(err.value)
    assert SECRET not in str(err.value)
