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
from agent.errors import ConfigError, FieldError
from agent.host import Host

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
            text = host.read_text(self.path)
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


def parse_fragment(text: str, origin: str, errors: list[FieldError]) -> Fragment | None:
    """A YAML document checked for apiVersion and kind; None (with errors) if unusable."""
    try:
        # libyaml's parser when PyYAML has it: the same safe loader, several times faster.
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        errors.append(FieldError("(document)", f"not valid YAML{where}: {problem}",
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
        errors.append(FieldError(
            "apiVersion", f"{doc.get('apiVersion')!r} is not supported by this agent "
            f"({__version__}), which reads {API_VERSION}",
            f"use apiVersion: {API_VERSION}, or an image with an agent that reads "
            f"{doc.get('apiVersion')}", origin=origin))
        ok = False
    if doc.get("kind") != KIND:
        errors.append(FieldError("kind", f"{doc.get('kind')!r} is not supported",
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

    def record(self, value: Any, path: str, origin: str) -> None:
        for table in (self.values, self.mappings):
            for stale in [p for p in table if p.startswith((path + ".", path + "["))]:
                del table[stale]
        if isinstance(value, dict):
            self.mappings[path] = origin
            for key, sub in value.items():
                self.record(sub, join_path(path, str(key)), origin)
        else:
            self.values[path] = origin


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
            origins.mappings[where] = origin
            _merge_into(dst[key], value, where, origin, origins)
            continue
        dst[key] = copy.deepcopy(value)
        origins.record(value, where, origin)


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
