"""A configuration fragment: a partial AgentConfig document and where it came from,
parsed from YAML and refused before it is built when it is too big, too deep or uses
aliases. Pure: the sources (agent/config/sources/) read the text."""

from __future__ import annotations

from typing import Any

import yaml

from agent import __version__, yamlsafe
from agent.config import yamlkeys
from agent.config.model import API_VERSION, KIND
from agent.errors import FieldError, shown
from agent.recordtype import record


@record(frozen=True)
class Fragment:
    """A partial document and where it came from."""

    origin: str
    document: dict[str, Any]
    shared: bool = False
    """Shared by nodes that may run other versions of the agent (the Machine's ConfigMap
    or Secret): a key this agent does not know is a warning, not an error (the version
    skew policy, docs/version-skew.md)."""


MAX_BYTES = 1 << 20
"""The largest configuration document taken (1 MiB; a real one is a few kB): anything
bigger is refused before it is parsed."""
MAX_DEPTH = 64
"""How deeply mappings and lists may nest (AgentConfig itself needs fewer than 10)."""


def parse_fragment(text: str, origin: str, errors: list[FieldError]) -> Fragment | None:
    """A YAML document checked for apiVersion and kind; None (with errors) if unusable.

    Refused before anything else looks at it: a document over MAX_BYTES, one with YAML
    aliases (`*name`: each expands to a copy of what it names, so a few hundred bytes of
    nested aliases stand for billions of values), or nested deeper than MAX_DEPTH."""
    if len(text) > MAX_BYTES:
        errors.append(FieldError("(document)", f"is {len(text)} characters long, over the "
                                 f"limit of {MAX_BYTES}", "give a configuration under 1 MiB",
                                 origin=origin))
        return None
    try:
        refused = yaml_structure_problem(text, yamlsafe.LOADER)
        if refused is not None:
            errors.append(FieldError("(document)", refused[0], refused[1], origin=origin))
            return None
        # libyaml's parser when PyYAML has it: the same safe loader, several times faster.
        doc = yamlkeys.load(text)
    except yamlkeys.DuplicateKey as err:
        errors.append(FieldError("(document)", str(err.problem), "give each key once (YAML "
                                 "would keep only the last one)", origin=origin))
        return None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        errors.append(FieldError("(document)", f"not valid YAML{where}: "
                                 f"{shown(str(problem), 200)}",
                                 origin=origin))
        return None
    if doc is None:
        return None
    if not isinstance(doc, dict):
        errors.append(FieldError("(document)", "expected a mapping at the top",
                                 f"start with apiVersion: {API_VERSION}", origin=origin))
        return None
    ok = True
    if doc.get("apiVersion") != API_VERSION:
        # A newer apiVersion may change what fields mean: never guessed at.
        version = shown(str(doc.get("apiVersion")))
        errors.append(FieldError(
            "apiVersion", f"{version} is not supported by this agent ({__version__}), "
            f"which reads {API_VERSION}",
            f"use apiVersion: {API_VERSION}, or an image with an agent that reads {version}",
            origin=origin))
        ok = False
    if doc.get("kind") != KIND:
        errors.append(FieldError("kind", f"{shown(str(doc.get('kind')))} is not supported",
                                 f"use kind: {KIND}", origin=origin))
        ok = False
    return Fragment(origin, doc) if ok else None


def yaml_structure_problem(text: str, loader: Any) -> tuple[str, str] | None:
    """An alias, or nesting deeper than MAX_DEPTH, as (problem, fix); read from the
    parser's events (linear in the text), before anything is built from them."""
    if "*" not in text and text.count("[") + text.count("{") + text.count(":") < MAX_DEPTH:
        return None  # no alias, and too short to nest that deep
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            line = event.start_mark.line + 1 if event.start_mark else 0
            return (f"uses a YAML alias (*{event.anchor}) at line {line}",
                    "write the value out instead of referring to an anchor")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return (f"nests mappings and lists deeper than {MAX_DEPTH} levels",
                        "flatten the document")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None
