"""The version-skew policy (docs/version-skew.md): an older agent reading a config a
newer one was written for. One ConfigMap serves the Machines of two image versions: the
older agent warns about a newer agent's setting and ignores it; it refuses a newer
apiVersion, a value it cannot honour, and a key that looks like a typo; the node's own
files stay strict."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent import __version__
from agent.config import load_config
from agent.config.sources import FileSource
from agent.errors import ConfigError
from agent.host import Host
from agent.kube.machine_config import ManagementSource

HEAD = "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"
ORIGIN = "configmap site-a/workers"
NEWER = HEAD + """spec:
  time:
    maxOffset: 50ms
    ntsKeyExchangeServers: [nts.example.net]   # a newer agent's setting
  fleetTelemetry: {enabled: true}                # a newer agent's section
"""


def configmap(text: str) -> ManagementSource:
    return ManagementSource(origin=ORIGIN, text=text)


def test_a_newer_agents_keys_in_the_shared_configmap_are_warnings_and_ignored(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        loaded = load_config(Host(tmp_path), [configmap(NEWER)])
    assert float(loaded.config.spec.time.max_offset) == 0.05  # what it knows, it applies
    assert sorted((w.origin, w.path) for w in loaded.warnings) == [
        (ORIGIN, "spec.fleetTelemetry"), (ORIGIN, "spec.time.ntsKeyExchangeServers")]
    said = [r.getMessage() for r in caplog.records]
    assert f"{ORIGIN}: spec.fleetTelemetry: unknown to this agent ({__version__}), " \
        "ignored: a setting of a newer agent? (docs/version-skew.md)" in said


def test_the_same_keys_in_the_nodes_own_file_are_refused(tmp_path: Path) -> None:
    baked = tmp_path / "config.yaml"
    baked.write_text(NEWER)
    with pytest.raises(ConfigError) as caught:
        load_config(Host(tmp_path), [FileSource(str(baked), outside_root=True)])
    assert {e.path for e in caught.value.errors} == {
        "spec.time.ntsKeyExchangeServers", "spec.fleetTelemetry"}


def test_a_typo_in_the_configmap_is_still_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(Host(tmp_path), [configmap(HEAD + "spec:\n  time:\n    maxOfset: 1s\n")])
    (error,) = caught.value.errors
    assert (error.origin, error.path, error.hint) == (
        ORIGIN, "spec.time.maxOfset", "did you mean 'maxOffset'?")


def test_a_newer_api_version_is_refused_naming_what_this_agent_reads(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(Host(tmp_path), [configmap(NEWER.replace("v1alpha1", "v1beta1"))])
    (error,) = caught.value.errors
    assert error.path == "apiVersion"
    assert error.message == (f"'machine-agent.io/v1beta1' is not supported by this agent "
                             f"({__version__}), which reads machine-agent.io/v1alpha1")


def test_a_value_this_agent_cannot_honour_is_refused(tmp_path: Path) -> None:
    """A new choice for a known field (a renderer added later): ignoring it would do
    something else than asked."""
    with pytest.raises(ConfigError) as caught:
        load_config(Host(tmp_path), [configmap(HEAD + "spec:\n  time:\n    renderer: ntpd\n")])
    (error,) = caught.value.errors
    assert (error.origin, error.path) == (ORIGIN, "spec.time.renderer")
