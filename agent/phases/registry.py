"""The phases, in the order they run: the one list of them.

The CLI (`--only`, `--skip`, `doctor --phase`), the configuration's checks of
`spec.skipPhases` and `spec.lifecycle.reconfigure`, the orchestrator, the doctor and the
generated docs all read it; nothing else names the phases.

A built-in phase is one line in `BUILTIN`. A third party adds one as IPAM plugins are
added: an entry point in the group `machine_agent.phases` naming its `Phase` subclass,
whose `after` says which phase it follows (empty: after every built-in one). Its settings
are `spec.phases.<name>`, decoded into its `Settings` dataclass (`settings_problems`).

Listing the names imports no phase (`--help` stays fast): only the entry points of
installed phase plugins are loaded, to learn where they run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib import import_module
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from agent.config import AgentConfig
    from agent.phases.base import Phase

GROUP = "machine_agent.phases"
"""Entry points that add a phase; the name is the phase's."""

NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


class Entry(NamedTuple):  # not a dataclass: importing dataclasses is slow for --help
    name: str
    target: str
    """`module:Class` of the phase."""


BUILTIN = (
    Entry("network", "agent.phases.network:NetworkPhase"),
    Entry("time", "agent.phases.time:TimePhase"),
    Entry("join", "agent.phases.join:JoinPhase"),
    Entry("cni", "agent.phases.cni:CNIPhase"),
)
"""The agent's own phases, in pipeline order."""


def _refused(message: str, hint: str) -> Exception:
    from agent.errors import PermanentError  # lazily: agent.errors is slow for --help

    return PermanentError(message, hint=hint)


def _plugins() -> list[Any]:
    from agent.entrypoints import entry_points

    return sorted(entry_points(GROUP), key=lambda ep: ep.name)


def _load_plugin(ep: Any) -> type[Phase]:
    from agent.phases.base import PhaseOf

    where = f"phase plugin {ep.name!r} (entry point {ep.value} in {GROUP})"
    if not NAME.match(ep.name) or ep.name in {e.name for e in BUILTIN}:
        raise _refused(f"{where}: the name is taken or not a lower-case word",
                       "rename the entry point, or uninstall the package")
    try:
        cls = ep.load()
    except Exception as err:
        raise _refused(f"{where} cannot be loaded: {type(err).__name__}: {err}",
                       "reinstall or uninstall the package that provides it") from err
    if not (isinstance(cls, type) and issubclass(cls, PhaseOf)) or cls.name != ep.name:
        raise _refused(f"{where} is not a Phase named {ep.name!r}",
                       "the entry point must name a Phase subclass whose name is the entry "
                       "point's")
    if not cls.success.info.healthy:
        raise _refused(f"{where}: its success reason {cls.success} says something is wrong",
                       "the phase's `success` must be a reason that says nothing is wrong "
                       "(Completed)")
    return cls


def _order(plugins: list[type[Phase]]) -> list[str]:
    """Built-in phases in order, each followed by the plugins that name it in `after`
    (by name); plugins with no `after` at the end."""
    follows: dict[str, list[str]] = {}
    for cls in plugins:
        follows.setdefault(cls.after, []).append(cls.name)
    out: list[str] = []

    def place(name: str) -> None:
        out.append(name)
        for child in follows.get(name, []):
            place(child)

    for entry in BUILTIN:
        place(entry.name)
    for child in follows.get("", []):
        place(child)
    lost = sorted({cls.name for cls in plugins} - set(out))
    if lost:
        raise _refused(f"phase plugin(s) {', '.join(lost)} follow a phase that is not "
                       "installed (their `after`)", f"install it, or uninstall {', '.join(lost)}")
    return out


def names() -> tuple[str, ...]:
    """Every phase's name in the order they run."""
    found = _plugins()
    if not found:
        return tuple(e.name for e in BUILTIN)
    return tuple(_order([_load_plugin(ep) for ep in found]))


def _builtin_classes() -> dict[str, type[Phase]]:
    classes: dict[str, type[Phase]] = {}
    for entry in BUILTIN:
        module, _, attr = entry.target.partition(":")
        classes[entry.name] = getattr(import_module(module), attr)
    return classes


def builtin() -> list[Phase]:
    """The agent's own phases, in order, without plugins (e.g. for the generated docs)."""
    return [cls() for cls in _builtin_classes().values()]


def load() -> list[Phase]:
    """Every phase, built-in and installed as a plugin, in the order they run; refused
    when a phase needs a fact that no phase before it provides."""
    classes = _builtin_classes()
    plugins = [_load_plugin(ep) for ep in _plugins()]
    classes.update((cls.name, cls) for cls in plugins)
    ordered = [classes[name] for name in _order(plugins)]
    _check_needs(ordered)
    return [cls() for cls in ordered]


def _check_needs(ordered: list[type[Phase]]) -> None:
    """Each phase's `needs` provided by a phase that runs before it."""
    provider = {fact: cls.name for cls in reversed(ordered) for fact in cls.provides}
    seen: set[type] = set()
    for cls in ordered:
        for fact in cls.needs:
            if fact in seen:
                continue
            if fact in provider:
                raise _refused(
                    f"phase {cls.name} needs {fact.__name__}, which phase {provider[fact]} "
                    f"provides, but runs before it", f"order {cls.name} after "
                    f"{provider[fact]} (a plugin's `after`, or agent/phases/registry.py)")
            raise _refused(f"phase {cls.name} needs {fact.__name__}, which no installed "
                           "phase provides",
                           f"install the phase that provides it, or uninstall {cls.name}")
        seen.update(cls.provides)


def conditions() -> tuple[str, ...]:
    """Every phase's condition type (its `condition`), in the order the phases run."""
    return tuple(p.condition for p in load())


def config_problems(document: dict[str, Any], phases: list[Phase]) -> Iterator[
        tuple[str, str, str | None]]:
    """What the configuration document gets wrong about the phases (paths under the
    document): unknown names in spec.skipPhases and spec.lifecycle.reconfigure, a phase
    listed there that cannot be applied again, and each plugin phase's own settings.
    Values of the wrong type are left to the model, which reports them."""
    by_name = {p.name: p for p in phases}
    known = ", ".join(by_name)
    spec = _mapping(document.get("spec"))
    for i, skipped in enumerate(_names(spec.get("skipPhases"))):
        if skipped is not None and skipped not in by_name:
            yield (f"spec.skipPhases[{i}]", f"{skipped!r} is not a phase",
                   f"phases are: {known}")
    again = _names(_mapping(spec.get("lifecycle")).get("reconfigure"))
    for i, name in enumerate(again):
        if name is None:
            continue
        if name not in by_name:
            yield (f"spec.lifecycle.reconfigure[{i}]", f"{name!r} is not a phase",
                   f"phases are: {known}")
        elif not by_name[name].reconfigurable:
            able = ", ".join(p.name for p in phases if p.reconfigurable)
            yield (f"spec.lifecycle.reconfigure[{i}]",
                   f"{name} cannot be applied again on a running node",
                   f"name only {able}")
    for name, settings in _mapping(spec.get("phases")).items():
        phase = by_name.get(str(name))
        if phase is None or phase.Settings is None:
            plugins = ", ".join(p.name for p in phases if p.Settings is not None)
            yield (f"spec.phases.{name}", f"no installed phase {name!r} takes settings",
                   f"phases with settings here: {plugins or 'none installed'}")
            continue
        if isinstance(settings, dict):
            yield from phase.settings_problems(settings)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _names(value: Any) -> list[str | None]:
    return [v if isinstance(v, str) else None for v in value] if isinstance(value, list) \
        else []


def reconfigurable(config: AgentConfig, phases: list[Phase]) -> list[str]:
    """The phases applied again when the configuration changes on a running node:
    spec.lifecycle.reconfigure, or (unset) every phase that can be, minus the skipped."""
    wanted = config.spec.lifecycle.reconfigure
    return [p.name for p in phases
            if (p.name in wanted if wanted is not None else p.reconfigurable)
            and p.name not in config.spec.skip_phases]
