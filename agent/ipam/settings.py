"""The installed IPAM plugins' judgement of the configuration: their settings under
spec.ipam.plugins and the pools named for them, found when the configuration is loaded
(`config validate` too), not first at run time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agent.config.fields import Decoder, Problem
from agent.config.ipam import IPAMSpec
from agent.config.network import NetworkSpec
from agent.ipam.base import ENTRY_POINT_GROUP


def plugin_problems(document: dict[str, Any]) -> Iterator[Problem]:
    """What the installed plugins the configuration uses find wrong in their settings and
    in the pools named for them (a plugin's optional `check_pool(options, pool)`). A
    plugin not installed here is left to the run, which names the installed ones; so are
    the settings of a plugin that has none here."""
    spec = document.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    # decoded on their own: a mistake elsewhere in the document is reported by the model
    ipam = Decoder().decode(IPAMSpec, spec.get("ipam", {}), "spec.ipam")
    network = Decoder().decode(NetworkSpec, spec.get("network", {}), "spec.network")
    if not isinstance(ipam, IPAMSpec) or not isinstance(network, NetworkSpec):
        return
    used = {a.ipam.plugin for iface in network.interfaces for a in iface.addresses
            if a.ipam is not None}
    for name in sorted(used | set(ipam.plugins)):
        factory = _installed(name)
        if factory is None:
            continue
        decoder = Decoder()
        where = f"spec.ipam.plugins.{name}"
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
                    yield (f"spec.network.interfaces[{i}].addresses[{j}].ipam.pool", problem,
                           f"name a pool {name} knows, or configure it under {where}")


def _installed(name: str) -> Any:
    """The factory registered as IPAM plugin `name`, or None."""
    from agent.entrypoints import entry_points  # lazily: only with IPAM configured

    found = [ep for ep in entry_points(ENTRY_POINT_GROUP) if ep.name == name]
    try:
        return found[0].load() if found else None
    except Exception:  # a third-party plugin that fails to import: the run says why
        return None
