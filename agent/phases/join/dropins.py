"""Drop-ins of CABPK's kubeadm.service, as providers' Ignition templates add them through
additionalConfig (CAPO's Flatcar template: `Requires=`/`After=` containerd.service and
coreos-metadata.service, `EnvironmentFile=/run/metadata/flatcar` whose variables the
preKubeadmCommands read). The agent runs /etc/kubeadm.sh in the unit's place, so it
carries out what such a drop-in says about the script: its `EnvironmentFile=` variables
are given to the script's commands (a file without the `-` prefix must exist, as systemd
requires); the ordering (`After=`, `Before=`, `Requires=`,
`Wants=`) holds already, the agent running once the boot started those units, and is
shown in the plan. Any other line is refused by name: it would change how kubeadm runs
under systemd, which the agent does not reproduce.
"""

from __future__ import annotations

import re
from typing import Any

from agent.config import checks
from agent.host import Host
from agent.phases.join.cloudconfig import BootstrapDataError
from agent.recordtype import record

_ORDERING = {"After", "Before", "Requires", "Wants"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@record(frozen=True)
class DropIns:
    environment_files: tuple[str, ...] = ()
    """EnvironmentFile= paths, a leading `-` kept (the file may be missing)."""
    ordering: tuple[str, ...] = ()
    """The ordering lines, as written (for the plan)."""


def read_dropins(dropins: list[Any], where: str) -> DropIns:
    files: list[str] = []
    ordering: list[str] = []
    for i, dropin in enumerate(dropins):
        if not isinstance(dropin, dict) or set(dropin) - {"name", "contents"}:
            raise BootstrapDataError(f"ignition {where}.dropins[{i}] is not a drop-in "
                                     "(name, contents)")
        name = f"{where}.dropins[{i}] ({dropin.get('name')})"
        section = ""
        for number, raw in enumerate(str(dropin.get("contents") or "").splitlines(), 1):
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line
                continue
            key, eq, value = line.partition("=")
            key, value = key.strip(), value.strip()
            if section == "[Unit]" and key in _ORDERING and eq:
                ordering.append(f"{key}={value}")
            elif section == "[Service]" and key == "EnvironmentFile" and value:
                path = value.removeprefix("-")
                if problem := checks.absolute_path(path):
                    raise BootstrapDataError(f"ignition {name} line {number}: {problem}")
                files.append(value)
            else:
                raise BootstrapDataError(
                    f"ignition {name} line {number}: {line!r} changes how kubeadm.service "
                    "runs, and the agent runs /etc/kubeadm.sh in the unit's place",
                    hint="the agent carries out EnvironmentFile= and the "
                         "ordering (After=, Requires=, ...); put the rest in "
                         "preKubeadmCommands")
    return DropIns(tuple(files), tuple(ordering))


def environment(host: Host, files: tuple[str, ...]) -> dict[str, str]:
    """The variables the script runs with, read now (coreos-metadata writes its file at
    boot); raises BootstrapDataError naming a required file that is missing."""
    env: dict[str, str] = {}
    for entry in files:
        path = entry.removeprefix("-")
        text = host.read_text(path)
        if text is None:
            if entry.startswith("-"):
                continue
            raise BootstrapDataError(
                f"kubeadm.service's EnvironmentFile {path} does not exist: systemd would "
                "not start the unit", hint="the unit that writes it (e.g. "
                "coreos-metadata.service) must have run; check it with systemctl status")
        env.update(_environment_file(text))
    return env


def _environment_file(text: str) -> dict[str, str]:
    """systemd's EnvironmentFile= syntax: NAME=VALUE lines, `#`/`;` comments, a value in
    single or double quotes unquoted."""
    out = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        key, eq, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not _NAME.match(key):
            continue  # systemd ignores such a line too (it logs it)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key] = value
    return out
