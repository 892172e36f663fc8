"""Credentials as data from any source: checked before use, stored 0600 in a 0700
directory through the Host, rewritten only when they change, never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import load_config
from agent.config.sources import FileSource
from agent.errors import ConfigError
from agent.host import Host
from agent.kube.credentials import store_credentials
from agent.logs import REDACT

TOKEN = "eyJhbGciOiJSUzI1NiJ9.node-worker-0.c2lnbmF0dXJl"


def config(tmp_path: Path, management: str):  # type: ignore[no-untyped-def]
    (tmp_path / "c.yaml").write_text(
        "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\nspec:\n"
        f"  management:\n{management}")
    return load_config(Host(tmp_path), [FileSource("/c.yaml", required=True)])


def test_token_data_is_stored_private_and_used_as_a_file(tmp_path: Path) -> None:
    loaded = config(tmp_path, f"    server: https://mgmt.example:6443\n"
                              f"    tokenData: {TOKEN}\n")
    host = Host(tmp_path)
    spec = store_credentials(loaded.config.spec.management, host)
    assert (spec.token_file, spec.token_data) == ("/var/lib/machine-agent/credentials/token",
                                                  None)
    stored = tmp_path / "var/lib/machine-agent/credentials/token"
    assert stored.read_text() == TOKEN + "\n"
    assert stored.stat().st_mode & 0o777 == 0o600
    assert stored.parent.stat().st_mode & 0o777 == 0o700
    effects = host.effects.count
    store_credentials(loaded.config.spec.management, host)
    assert host.effects.count == effects  # unchanged: not written again
    assert TOKEN not in REDACT(f"token is {TOKEN}")


@pytest.mark.parametrize(("management", "expected"), [
    ("    server: https://m.example\n    tokenData: \"two\\nlines\"\n",
     "spec.management.tokenData: is not a bearer token"),
    ("    kubeconfig: /etc/k\n    kubeconfigData: x\n",
     "spec.management.kubeconfigData: give either kubeconfig or kubeconfigData, not both"),
    ("    tokenData: abcdefgh\n",
     "spec.management.server: is required with tokenData and caData"),
    ("    server: https://m.example\n    tokenData: abcdefgh\n    caData: not a cert\n",
     "spec.management.caData: is not PEM certificate text"),
])
def test_bad_credentials_are_refused_without_showing_them(
        tmp_path: Path, management: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        config(tmp_path, management)
    assert expected in str(err.value)
    assert "two\\nlines" not in str(err.value) and "two\nlines" not in str(err.value)
