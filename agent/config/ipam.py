"""`spec.ipam`: the IPAM backends' own settings, by plugin name."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent.config.fields import Decoder, setting

if TYPE_CHECKING:
    from agent.config.network import NetworkSpec

Problem = tuple[str, str, str | None]
ENTRY_POINT_GROUP = "machine_agent.ipam"
"""Where IPAM plugins are registered (entry points); the name is the plugin's."""


@dataclass(frozen=True)
class IPAMSpec:
    plugins: dict[str, dict[str, Any]] = setting(
        "Settings of each IPAM plugin, by plugin name (e.g. static, capi, netbox). Each "
        "installed plugin checks its own settings, and the pools named for it, with the rest "
        "of the configuration (`config validate` too); errors name the full path.",
        factory=dict)


def plugin_problems(ipam: IPAMSpec, network: NetworkSpec) -> Iterator[Problem]:
    """What the installed plugins the configuration uses find wrong in their settings and
    in the pools named for them (a plugin's optional `check_pool(options, pool)`), with
    paths under spec: found by `config validate`, not first at run time. A plugin not
    installed here is left to the run, which names the installed ones; so are the
    settings of a plugin that has none here."""
    used = {a.ipam.plugin for iface in network.interfaces for a in iface.addresses
            if a.ipam is not None}
    for name in sorted(used | set(ipam.plugins)):
        factory = _installed(name)
        if factory is None:
            continue
        decoder = Decoder()
        where = f"ipam.plugins.{name}"
        options = decoder.decode(factory.OPTIONS, ipam.plugins.get(name, {}), where)
        if decoder.errors:
            # settings not given here may come from another source (the Machine's
            # ConfigMap): only given ones are judged now
            if name in ipam.plugins:
                for err in decoder.errors:
                    yield err.path, err.message, err.hint
            continue
        check_pool = getattr(factory, "check_pool", None)
        for i, iface in enumerate(network.interfaces):
            for j, address in enumerate(iface.addresses):
                ref = address.ipam
                if check_pool is None or ref is None or ref.plugin != name:
                    continue
                problem = check_pool(options, ref.pool)
                if problem:
                    yield (f"network.interfaces[{i}].addresses[{j}].ipam.pool", problem,
                           f"name a pool {name} knows, or configure it under spec.{where}")


def _installed(name: str) -> Any:
    """The factory registered as IPAM plugin `name`, or None."""
    from importlib.metadata import entry_points  # lazily: only with IPAM configured

    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    try:
        return found[0].load() if found else None
    except Exception:  # a third-party plugin that fails to import: the run says why
        return None
