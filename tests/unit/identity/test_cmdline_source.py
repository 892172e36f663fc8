"""The kernel command line as a source: the Machine and a config file from a PXE or ISO
boot entry, split as the kernel splits it, and hostile values refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import default_sources, load_config
from agent.config.sources.cmdline import split_cmdline
from agent.errors import ConfigError
from agent.host import Host

BOOT = "BOOT_IMAGE=/vmlinuz-6.1.0-18-amd64 root=UUID=1b2c ro quiet console=ttyS0,115200n8"
FILE = """apiVersion: machine-agent.io/v1alpha1
kind: AgentConfig
spec:
  identity: {nodeName: from-file}
  time: {maxOffset: 75ms}
"""


def node(tmp_path: Path, cmdline: str, files: dict[str, str] | None = None) -> Host:
    for path, text in {"/proc/cmdline": cmdline + "\n", **(files or {})}.items():
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return Host(tmp_path)


def load(host: Host):  # type: ignore[no-untyped-def]
    return load_config(host, default_sources())


def test_split_like_the_kernel() -> None:
    assert split_cmdline('a  b="c d" "e=f g" h -- init-arg machine-agent.machine=x/y') == \
        ["a", "b=c d", "e=f g", "h"]


def test_machine_and_config_file_with_their_origins(tmp_path: Path) -> None:
    host = node(tmp_path, f"{BOOT} machine-agent.machine=fleet/worker-9 "
                          "machine-agent.config=/run/machine-agent/boot.yaml",
                {"/run/machine-agent/boot.yaml": FILE})
    loaded = load(host)
    machine = loaded.config.spec.identity.machine
    assert machine is not None and (machine.namespace, machine.name) == ("fleet", "worker-9")
    assert loaded.origin_of("spec.identity.machine.name") == \
        "kernel command line machine-agent.machine"
    assert loaded.origin_of("spec.time.maxOffset") == \
        "kernel command line machine-agent.config=/run/machine-agent/boot.yaml"


def test_the_parameter_wins_over_the_file_it_names(tmp_path: Path) -> None:
    in_file = FILE.replace("identity: {nodeName: from-file}",
                           "identity: {machine: {namespace: a, name: from-file}}")
    host = node(tmp_path, "machine-agent.config=/boot.yaml machine-agent.machine=b/from-param",
                {"/boot.yaml": in_file})
    machine = load(host).config.spec.identity.machine
    assert machine is not None and (machine.namespace, machine.name) == ("b", "from-param")


def test_no_proc_cmdline_gives_nothing(tmp_path: Path) -> None:
    assert load(Host(tmp_path)).config.spec.identity.machine is None


@pytest.mark.parametrize(("cmdline", "expected"), [
    ("machine-agent.machine=worker-9",
     'kernel command line machine-agent.machine: machine-agent.machine: "worker-9" is not '
     "NAMESPACE/NAME"),
    ("machine-agent.machine=../../etc/passwd",
     "kernel command line machine-agent.machine: machine-agent.machine: \"../../etc/passwd\""
     " is not NAMESPACE/NAME"),
    ("machine-agent.machine=../etc",
     'kernel command line machine-agent.machine: machine-agent.machine: ".." is not a valid'),
    ('"machine-agent.machine=fleet/a\tb"',
     "kernel command line machine-agent.machine: machine-agent.machine: \"a\\tb\" is not"),
    ("machine-agent.machine=Fleet/worker",
     'kernel command line machine-agent.machine: machine-agent.machine: "Fleet" is not'),
    ("machine-agent.config=relative.yaml",
     "kernel command line machine-agent.config=relative.yaml: machine-agent.config: "
     '"relative.yaml" is not a plain absolute path'),
    ("machine-agent.config=/run/../etc/shadow",
     'machine-agent.config: "/run/../etc/shadow" is not a plain absolute path'),
    ("machine-agent.confg=/x.yaml",
     "kernel command line (/proc/cmdline): machine-agent.confg: unknown parameter"),
    ("machine-agent.machine",
     "kernel command line (/proc/cmdline): machine-agent.machine: needs a value"),
    ("machine-agent.machine=a/b machine-agent.machine=a/c",
     "kernel command line (/proc/cmdline): machine-agent.machine: is given twice with "
     "different values"),
])
def test_hostile_or_mistaken_values_are_refused_naming_the_source(
        tmp_path: Path, cmdline: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(node(tmp_path, f"{BOOT} {cmdline}"))
    assert expected in str(err.value)


def test_the_same_parameter_twice_with_one_value_is_fine(tmp_path: Path) -> None:
    host = node(tmp_path, "machine-agent.machine=a/b machine-agent.machine=a/b")
    assert load(host).config.spec.identity.machine is not None


def test_a_missing_config_file_names_the_command_line_and_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load(node(tmp_path, f"{BOOT} machine-agent.config=/media/config-2/agent.yaml"))
    assert "kernel command line machine-agent.config=/media/config-2/agent.yaml: (file): " \
           "does not exist" in str(err.value)


def test_a_malformed_config_file_names_the_command_line_and_path(tmp_path: Path) -> None:
    host = node(tmp_path, "machine-agent.config=/boot.yaml",
                {"/boot.yaml": FILE.replace("maxOffset: 75ms", "maxOffset: soon")})
    with pytest.raises(ConfigError) as err:
        load(host)
    assert "kernel command line machine-agent.config=/boot.yaml: spec.time.maxOffset: " \
           "'soon' is not a duration" in str(err.value)


def test_an_unreadable_config_file_names_the_command_line_and_path(tmp_path: Path) -> None:
    host = node(tmp_path, "machine-agent.config=/boot.yaml")
    (tmp_path / "boot.yaml").mkdir()
    with pytest.raises(ConfigError) as err:
        load(host)
    assert "kernel command line machine-agent.config=/boot.yaml: (file): cannot read" \
        in str(err.value)
