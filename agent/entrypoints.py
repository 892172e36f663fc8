"""Installed distributions' entry points (the plugin phases, IPAM plugins and commands),
read without importlib.metadata.

importlib.metadata brings email, zipfile, csv and pathlib's machinery: ~30 ms of CPU and
~4 MiB of a bootstrap's peak memory (bench/README.md), for reading a few small INI files.
This reads them as it does: every `*.dist-info` and `*.egg-info` directory on sys.path,
in sys.path's order, the first distribution of a name winning (importlib.metadata's
`_unique`), `entry_points.txt` parsed as the entry points specification says (INI,
`name = module:attr`, case-sensitive names). Zip files on sys.path are not searched (no
plugin is installed into one).
"""

from __future__ import annotations

import os
import re
import sys
from importlib import import_module
from typing import Any, NamedTuple


class EntryPoint(NamedTuple):
    name: str
    value: str
    """`module:attr` (an attribute path, perhaps followed by `[extras]`)."""
    group: str

    def load(self) -> Any:
        module, _, attr = self.value.partition(":")
        obj: Any = import_module(module.strip())
        for part in attr.split("[", 1)[0].strip().split("."):
            if part:
                obj = getattr(obj, part)
        return obj


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points in `group` of every installed distribution."""
    found: list[EntryPoint] = []
    seen: set[str] = set()
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:  # a zip file, or a directory that is gone
            continue
        for name in names:
            if not name.lower().endswith((".dist-info", ".egg-info")):
                continue
            # the name before the version, normalized (importlib.metadata's
            # _name_from_stem and Prepared.normalize)
            dist = re.sub(r"[-_.]+", "_", name.rpartition(".")[0].partition("-")[0]).lower()
            if dist in seen:
                continue
            seen.add(dist)
            found.extend(_read(os.path.join(entry or ".", name, "entry_points.txt"), group))
    return found


def _read(path: str, group: str) -> list[EntryPoint]:
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    out: list[EntryPoint] = []
    section = None
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if section != group or "=" not in line:
            continue
        name, _, value = line.partition("=")
        out.append(EntryPoint(name.strip(), value.strip(), group))
    return out
