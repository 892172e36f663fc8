"""`spec.ipam`: the IPAM backends' own settings, by plugin name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.config.fields import setting


@dataclass(frozen=True)
class IPAMSpec:
    plugins: dict[str, dict[str, Any]] = setting(
        "Settings of each IPAM plugin, by plugin name (e.g. static, capi, netbox). Each "
        "plugin checks its own settings when it is loaded; errors name the full path.",
        factory=dict)
