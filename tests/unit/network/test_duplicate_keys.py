"""A key given twice in one YAML mapping is refused, naming the key and both lines: YAML
loaders keep the last one silently (an interface written twice in a v2 file lost its
first addresses, where netplan merges the two)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config.sources import FileSource, load_config
from agent.errors import ConfigError
from agent.host import Host

V2_TWICE = """\
network:
  version: 2
  ethernets:
    eth0:
      addresses: [192.0.2.10/24]
    eth0:
      dhcp4: true
"""

CONFIG_TWICE = """\
apiVersion: machine-agent.io/v1alpha1
kind: AgentConfig
spec:
  network:
    hostname: node-1
    hostname: node-2
"""


def config_file(root: Path, text: str) -> None:
    path = root / "etc/machine-agent/config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def errors(root: Path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(Host(root), [FileSource("/etc/machine-agent/config.yaml")])
    return [str(e) for e in info.value.errors]


def test_an_interface_written_twice_in_a_v2_file_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "nc.yaml").write_text(V2_TWICE)
    config_file(tmp_path, "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"
                          "spec:\n  network:\n    networkConfigFrom: /nc.yaml\n")
    (error,) = errors(tmp_path)
    assert "the key 'eth0' is given twice in one mapping (lines 4 and 6)" in error
    assert "network-config v2 file /nc.yaml" in error


def test_a_key_written_twice_in_the_configuration_is_refused_naming_it(
        tmp_path: Path) -> None:
    config_file(tmp_path, CONFIG_TWICE)
    (error,) = errors(tmp_path)
    assert "the key 'hostname' is given twice in one mapping (lines 5 and 6)" in error
    assert "give each key once" in error


def test_the_same_key_in_two_mappings_is_not_a_duplicate(tmp_path: Path) -> None:
    (tmp_path / "nc.yaml").write_text(
        "network:\n  version: 2\n  ethernets:\n    eth0: {addresses: [192.0.2.10/24]}\n"
        "    eth1: {addresses: [198.51.100.10/24]}\n")
    config_file(tmp_path, "apiVersion: machine-agent.io/v1alpha1\nkind: AgentConfig\n"
                          "spec:\n  network:\n    networkConfigFrom: /nc.yaml\n")
    loaded = load_config(Host(tmp_path), [FileSource("/etc/machine-agent/config.yaml")])
    assert [i.name for i in loaded.config.spec.network.interfaces] == ["eth0", "eth1"]
