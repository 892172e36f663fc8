"""Fragments merged in order into one document, the origin of every value in it, and the
configuration loaded from it. Pure: agent/config/sources/chain.py reads the sources."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from dataclasses import field
from typing import Any

from agent.config.fields import join_path
from agent.config.fragment import Fragment
from agent.config.model import API_VERSION, KIND, AgentConfig
from agent.errors import FieldError
from agent.recordtype import record

DEFAULT = "default"


@record
class Origins:
    """Where values came from: `values` for scalars and lists (a list is set whole),
    `mappings` for the mappings a source wrote (an error inside one names that source)."""

    values: dict[str, str] = field(default_factory=dict)
    mappings: dict[str, str] = field(default_factory=dict)

    def of_value(self, path: str) -> str:
        """The origin of the value at `path` (or the list holding it), else `default`."""
        for probe in _ancestors(path):
            if probe in self.values:
                return self.values[probe]
        return DEFAULT

    def of_problem(self, path: str) -> str | None:
        """The source to blame for a problem at `path`: the nearest one that wrote it."""
        for probe in _ancestors(path):
            if probe in self.values:
                return self.values[probe]
            if probe in self.mappings:
                return self.mappings[probe]
        return None

    children: dict[str, list[str]] = field(default_factory=dict)
    """The paths recorded directly below each path, so that replacing a value forgets
    what was below it in time proportional to that, not to everything recorded (a
    scan per value made merging quadratic: 88 s for a flat 270 kB file)."""

    def record(self, value: Any, path: str, origin: str, parent: str = "") -> None:
        """`value` was written whole at `path` (below `parent`) by `origin`."""
        self.forget_below(path)
        self.link(path, parent)
        if isinstance(value, dict):
            self.values.pop(path, None)
            self.mappings[path] = origin
            for key, sub in value.items():
                self.record(sub, join_path(path, str(key)), origin, path)
        else:
            self.mappings.pop(path, None)
            self.values[path] = origin

    def merged(self, path: str, origin: str, parent: str = "") -> None:
        """`origin` wrote into the mapping at `path`, key by key."""
        self.link(path, parent)
        self.mappings[path] = origin

    def link(self, path: str, parent: str) -> None:
        below = self.children.setdefault(parent, [])
        if not below or below[-1] != path:  # a repeat is harmless; most are caught here
            below.append(path)

    def forget_below(self, path: str) -> None:
        pending = self.children.pop(path, [])
        while pending:  # by a work list: a deep document does not hit the recursion limit
            child = pending.pop()
            self.values.pop(child, None)
            self.mappings.pop(child, None)
            pending.extend(self.children.pop(child, []))


def _ancestors(path: str) -> Iterator[str]:
    """`a.b[0].c`, then `a.b[0]`, `a.b`, `a`."""
    while path:
        yield path
        cut = max(path.rfind("."), path.rfind("["))
        path = path[:cut] if cut > 0 else ""


@record
class LoadedConfig:
    config: AgentConfig
    document: dict[str, Any]
    origins: Origins = field(default_factory=Origins)
    warnings: list[FieldError] = field(default_factory=list)
    """Keys of a shared source this agent does not know, ignored (docs/version-skew.md)."""

    def origin_of(self, path: str) -> str:
        return self.origins.of_value(path)


def merge(fragments: Iterable[Fragment]) -> tuple[dict[str, Any], Origins]:
    """Merge fragments in order; return the document and the origin of every value."""
    merged: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND}
    origins = Origins()
    for frag in fragments:
        _merge_into(merged, frag.document, "", frag.origin, origins)
    return merged, origins


def _merge_into(dst: dict[str, Any], src: dict[str, Any], path: str, origin: str,
                origins: Origins) -> None:
    for key, value in src.items():
        where = join_path(path, str(key))
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            origins.merged(where, origin, path)
            _merge_into(dst[key], value, where, origin, origins)
            continue
        dst[key] = copy.deepcopy(value)
        origins.record(value, where, origin, path)
