"""Credentials from a kubeconfig or from spec.management's server, token file and CA."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest

from agent.config.management import ManagementSpec
from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.kube.kubeconfig import MATERIAL_DIR, load_credentials
from agent.logs import REDACT

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN EC PRIVATE KEY-----\nMHcC\n-----END EC PRIVATE KEY-----\n"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def kubeconfig(cluster: str, user: str, current: str = "node") -> str:
    return f"""apiVersion: v1
kind: Config
current-context: {current}
clusters:
- name: mgmt
  cluster:
{cluster}
users:
- name: worker-0
  user:
{user}
contexts:
- name: node
  context: {{cluster: mgmt, user: worker-0, namespace: default}}
"""


def write(tmp_path: Path, path: str, text: str) -> None:
    target = tmp_path / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def test_certificate_data_is_written_0600_under_run_and_used_by_path(tmp_path: Path) -> None:
    write(tmp_path, "/etc/machine-agent/kubeconfig", kubeconfig(
        f"    server: https://192.0.2.10:6443\n    certificate-authority-data: {b64(CA)}",
        f"    client-certificate-data: {b64(CA)}\n    client-key-data: {b64(KEY)}"))
    host = Host(tmp_path)
    creds = load_credentials(ManagementSpec(kubeconfig="/etc/machine-agent/kubeconfig"), host)
    key = tmp_path / MATERIAL_DIR.lstrip("/") / "client.key"
    assert creds.cert == (str(key.with_name("client.crt")), str(key))
    assert key.read_text() == KEY and key.stat().st_mode & 0o777 == 0o600
    assert creds.verify == str(key.with_name("ca.crt"))
    assert creds.server == "https://192.0.2.10:6443"
    assert "MHcC" not in REDACT(f"key {KEY}")


def test_relative_files_and_token_resolve_beside_the_kubeconfig(tmp_path: Path) -> None:
    write(tmp_path, "/etc/mk/ca.crt", CA)
    write(tmp_path, "/etc/mk/kubeconfig", kubeconfig(
        "    server: https://mgmt.example:6443\n    certificate-authority: ca.crt",
        "    token: abcdef-a-long-token-1234"))
    creds = load_credentials(ManagementSpec(kubeconfig="/etc/mk/kubeconfig"), Host(tmp_path))
    assert creds.verify == str(tmp_path / "etc/mk/ca.crt")
    assert creds.token == "abcdef-a-long-token-1234"
    assert "abcdef-a-long-token-1234" not in repr(creds)
    assert REDACT("token abcdef-a-long-token-1234") == "token ***"


def test_insecure_skip_tls_verify_is_refused_unless_configured(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write(tmp_path, "/k", kubeconfig(
        "    server: https://mgmt.example:6443\n    insecure-skip-tls-verify: true",
        "    token: abcdef-a-long-token-1234"))
    with pytest.raises(PermanentError) as err:
        load_credentials(ManagementSpec(kubeconfig="/k"), Host(tmp_path))
    assert err.value.reason == Reason.ConfigInvalid
    assert "insecure-skip-tls-verify" in str(err.value)
    assert "insecureSkipTLSVerify: true" in str(err.value)
    with caplog.at_level(logging.WARNING):
        creds = load_credentials(ManagementSpec(kubeconfig="/k",
                                                insecure_skip_tls_verify=True), Host(tmp_path))
    assert creds.verify is False
    assert "TLS VERIFICATION OF THE MANAGEMENT CLUSTER IS DISABLED" in caplog.text


def test_server_token_file_and_ca_file(tmp_path: Path) -> None:
    write(tmp_path, "/etc/mk/token", "tok-0123456789\n")
    write(tmp_path, "/etc/mk/ca.crt", CA)
    spec = ManagementSpec(server="https://mgmt.example:6443", token_file="/etc/mk/token",
                          ca_file="/etc/mk/ca.crt")
    creds = load_credentials(spec, Host(tmp_path))
    assert creds.token == "tok-0123456789"
    assert creds.verify == str(tmp_path / "etc/mk/ca.crt")


@pytest.mark.parametrize(("cluster", "user", "current", "expected"), [
    ("    server: http://mgmt:8080", "    token: abcdefgh", "node", "not an https:// URL"),
    ("    server: https://mgmt:6443", "    exec: {command: aws}", "node", "'exec'"),
    ("    server: https://mgmt:6443", "    token: abcdefgh", "other",
     "no context named 'other'"),
])
def test_unusable_kubeconfigs_say_why(tmp_path: Path, cluster: str, user: str, current: str,
                                      expected: str) -> None:
    write(tmp_path, "/k", kubeconfig(cluster, user, current))
    with pytest.raises(PermanentError, match=expected):
        load_credentials(ManagementSpec(kubeconfig="/k"), Host(tmp_path))


def test_a_missing_token_file_is_named(tmp_path: Path) -> None:
    spec = ManagementSpec(server="https://mgmt:6443", token_file="/etc/mk/token")
    with pytest.raises(PermanentError, match="/etc/mk/token does not exist"):
        load_credentials(spec, Host(tmp_path))
