"""Configuration sources, their precedence, and where every value came from.

Each source yields fragments: partial AgentConfig documents with an origin. The chain
merges them in order (a later fragment wins; mappings merge key by key, lists and scalars
are replaced whole) and remembers the origin of every value, so `config show --origin`
can say which file, instance-data key or ConfigMap set it.

Precedence, lowest first:
  1. built-in defaults
  2. the baked file              /etc/machine-agent/config.yaml
  3. drop-ins, lexical order     /etc/machine-agent/config.d/*.yaml
  4. cloud-init instance data    (agent.config.cloudinit): the metadata key
     `machine-agent`, then each user-data MIME part `application/x-machine-agent+yaml`,
     origin e.g. `cloud-init user-data (part machine-agent.yaml)`
  5. the kernel command line     (agent.config.cmdline): the file named by
     `machine-agent.config=PATH`, then `machine-agent.machine=NAMESPACE/NAME`
  6. files given with --config, in the order given
  7. the management cluster: the ConfigMap or Secret named by the Machine's annotation
     `machine-agent.io/config` (`configmap/NAME` or `secret/NAME`, key `config.yaml`),
     origin e.g. `configmap default/worker-0-agent` (agent.kube.machine.ManagementSource).
     It is above the local files: the cluster operator's per-Machine settings win over
     what the image bakes in. `spec.identity` and `spec.management` say how to reach the
     cluster, so they come from local sources only; the fragment may not set them.

Why this order: the image is generic (2, 3); the platform says what this instance is
(4); a boot entry is chosen per machine by whoever boots it, on bare metal where there is
no cloud-init datasource, and is the more deliberate choice when both exist (5); a person
at the console passes --config on purpose (6); the cluster has the last word on what it
owns (7).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import yaml

from agent import __version__
from agent.config.fields import Decoder, Problem, join_path
from agent.config.model import API_VERSION, KIND, AgentConfig
from agent.errors import ConfigError, FieldError, shown
from agent.host import Host
from agent.hostpath import UnreadableFileError

log = logging.getLogger(__name__)

BAKED_FILE = "/etc/machine-agent/config.yaml"
DROP_IN_DIR = "/etc/machine-agent/config.d"
DEFAULT = "default"


@dataclass(frozen=True)
class Fragment:
    """A partial document and where it came from."""

    origin: str
    document: dict[str, Any]
    shared: bool = False
    """Shared by nodes that may run other versions of the agent (the Machine's ConfigMap
    or Secret): a key this agent does not know is a warning, not an error (the version
    skew policy, docs/version-skew.md)."""


class Source(Protocol):
    def fragments(self, host: Host, errors: list[FieldError]) -> Iterable[Fragment]:
        """The source's fragments; problems reading them go to `errors`."""


@dataclass(frozen=True)
class FileSource:
    """One YAML file; a missing file is an error only when `required`.

    `outside_root` files (given on the command line) are read from the real file system,
    not from under the Host's root.
    """

    path: str
    required: bool = False
    outside_root: bool = False

    def fragments(self, host: Host, errors: list[FieldError]) -> Iterable[Fragment]:
        if self.outside_root:
            host = Host("/", read_only=True)
        try:
            text = host.read_text(self.path, limit=MAX_BYTES)
        except UnreadableFileError as err:
            errors.append(FieldError("(file)", f"cannot read: {err}", "give a configuration "
                                     "under 1 MiB, as a regular file", origin=self.path))
            return []
        except (OSError, UnicodeDecodeError) as err:
            errors.append(FieldError("(file)", f"cannot read: {err}", origin=self.path))
            return []
        if text is None:
            if self.required:
                errors.append(FieldError("(file)", "does not exist", origin=self.path))
            return []
        fragment = parse_fragment(text, self.path, errors)
        return [fragment] if fragment else []


@dataclass(frozen=True)
class DropInSource:
    """Every `*.yaml` in a directory, in lexical order."""

    directory: str

    def fragments(self, host: Host, errors: list[FieldError]) -> Iterable[Fragment]:
        out: list[Fragment] = []
        for name in host.list_dir(self.directory):
            if name.endswith((".yaml", ".yml")):
                out.extend(FileSource(f"{self.directory}/{name}").fragments(host, errors))
        return out


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
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        refused = yaml_structure_problem(text, loader)
        if refused is not None:
            errors.append(FieldError("(document)", refused[0], refused[1], origin=origin))
            return None
        # libyaml's parser when PyYAML has it: the same safe loader, several times faster.
        doc = yaml.load(text, Loader=loader)
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


@dataclass
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


@dataclass
class LoadedConfig:
    config: AgentConfig
    document: dict[str, Any]
    origins: Origins = field(default_factory=Origins)
    warnings: list[FieldError] = field(default_factory=list)
    """Keys of a shared source this agent does not know, ignored (docs/version-skew.md)."""

    def origin_of(self, path: str) -> str:
        return self.origins.of_value(path)


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


def default_sources(extra_files: Iterable[str] = (), *,
                    cloud_init_wait: float | None = None) -> list[Source]:
    """The local sources in precedence order (module docstring); `cloud_init_wait`
    bounds the wait for cloud-init (default agent.config.cloudinit.DEFAULT_WAIT)."""
    # Imported here: those modules build on Fragment and FileSource from this one.
    from agent.config.cloudinit import DEFAULT_WAIT, CloudInitSource
    from agent.config.cmdline import KernelCmdlineSource

    wait = DEFAULT_WAIT if cloud_init_wait is None else cloud_init_wait
    return [FileSource(BAKED_FILE), DropInSource(DROP_IN_DIR), CloudInitSource(wait),
            KernelCmdlineSource(),
            *(FileSource(f, required=True, outside_root=True) for f in extra_files)]


ConfigCheck = Callable[[dict[str, Any]], Iterable[Problem]]
"""A check of the merged document by what knows more than the model (the phase
registry, the installed IPAM plugins); it runs also when the document has other mistakes,
so every error is listed at once. Its paths start at the document's root."""


def load_config(host: Host, sources: Iterable[Source],
                checks: Iterable[ConfigCheck] = ()) -> LoadedConfig:
    """Read, merge and validate (the model's own checks, then `checks`); raises
    ConfigError listing every problem with its origin."""
    errors: list[FieldError] = []
    fragments = [frag for source in sources for frag in source.fragments(host, errors)]
    document, origins = merge(fragments)
    from agent.config.netconfig_source import read_network_config  # builds on this module

    read_network_config(host, document, origins, errors)
    decoder = Decoder()
    config = decoder.decode_object(AgentConfig, document, "")
    for check in checks:
        for path, message, hint in check(document):
            decoder.fail(path, message, hint)
    shared = {f.origin for f in fragments if f.shared}
    warnings: list[FieldError] = []
    for e in decoder.errors:
        found = FieldError(e.path, e.message, e.hint, origin=origins.of_problem(e.path))
        (warnings if _newer_agents_key(found, shared) else errors).append(found)
    if errors or not isinstance(config, AgentConfig):
        raise ConfigError(errors)
    for w in warnings:
        log.warning("%s: %s: unknown to this agent (%s), ignored: a setting of a newer "
                    "agent? (docs/version-skew.md)", w.origin, w.path, __version__)
    return LoadedConfig(config, document, origins, warnings)


def _newer_agents_key(error: FieldError, shared: set[str]) -> bool:
    """An unknown key in a shared source that resembles no known one: taken for a setting
    a newer agent knows. A near miss ("did you mean ...") stays an error: a typo must
    not be ignored silently."""
    return (error.message == "unknown field" and error.origin in shared
            and not (error.hint or "").startswith("did you mean"))
