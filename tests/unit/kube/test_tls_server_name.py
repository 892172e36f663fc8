"""kubeconfig's `tls-server-name`: a server reached at an address its certificate does not
name (through a relay or a load balancer) is verified against the given name instead."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from machine_agent_sandbox.testkit.certs import DAY, NOW, https_server, make_ca, pem, serving_cert

from agent.config.management import ManagementSpec
from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.kube.client import Client
from agent.kube.errors import Unreachable
from agent.kube.kubeconfig import Credentials, load_credentials
from agent.retry import Backoff

NAME = "api.mgmt.example"
"""The only name the test server's certificate holds (not 127.0.0.1, where it listens)."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTPS server on 127.0.0.1 whose certificate names only NAME; (URL, CA file)."""
    ca = make_ca("test-ca")
    (tmp_path / "ca.crt").write_bytes(pem(ca.cert))
    chain, key = serving_cert(ca, tmp_path, names=[x509.DNSName(NAME)],
                              not_before=NOW - DAY, not_after=NOW + DAY)
    with https_server(chain, key, body=b'{"kind": "Machine"}') as httpd:
        yield httpd.url, tmp_path / "ca.crt"


def get(url: str, ca: Path, server_name: str | None) -> object:
    creds = Credentials(url, token="t0ken", ca_file=str(ca), tls_server_name=server_name)
    return Client(creds, timeout=5.0, backoff=Backoff(0.01, 0.01, 1)).get("/x")


def test_the_certificate_is_verified_against_tls_server_name(
        server: tuple[str, Path]) -> None:
    url, ca = server
    assert get(url, ca, NAME) == {"kind": "Machine"}


def test_without_it_or_with_another_name_verification_fails(
        server: tuple[str, Path]) -> None:
    url, ca = server
    for name, checked, setting in ((None, "127.0.0.1", "spec.management's server"),
                                   ("other.mgmt.example", "other.mgmt.example",
                                    "the kubeconfig's tls-server-name")):
        with pytest.raises(Unreachable) as caught:
            get(url, ca, name)
        assert caught.value.message == (
            f"GET /x: TLS verification of {url} failed: the server's certificate is not "
            f"valid for {checked!r}")
        assert (caught.value.hint or "").startswith(f"{setting} "), caught.value.hint


def test_kubeconfig_tls_server_name_is_read_and_checked(tmp_path: Path) -> None:
    def load(name: str) -> Credentials:
        (tmp_path / "kubeconfig").write_text(f"""apiVersion: v1
kind: Config
current-context: node
clusters:
- name: mgmt
  cluster: {{server: "https://198.51.100.1:6443", tls-server-name: "{name}"}}
users:
- name: node
  user: {{token: abc}}
contexts:
- name: node
  context: {{cluster: mgmt, user: node}}
""")
        return load_credentials(ManagementSpec(kubeconfig="/kubeconfig"), Host(tmp_path))

    assert load(NAME).tls_server_name == NAME
    assert load("127.0.0.1").tls_server_name == "127.0.0.1"
    with pytest.raises(PermanentError, match=r"tls-server-name: .* not a valid host name") as err:
        load("api.example\\nextra")
    assert err.value.reason == Reason.ConfigInvalid
