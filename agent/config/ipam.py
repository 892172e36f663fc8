"""`spec.ipam`: the IPAM backends' own settings, by plugin name.

Which plugins exist, and whether their settings are right, the configuration cannot know:
the plugins are found through entry points above it (agent.ipam.settings checks them once
the configuration is loaded, `config validate` too).
"""

from __future__ import annotations

from typing import Any

from agent.config.fields import setting
from agent.recordtype import record


@record(frozen=True)
class IPAMSpec:
    plugins: dict[str, dict[str, Any]] = setting(
        "Settings of each IPAM plugin, by plugin name (e.g. static, capi, netbox). Each "
        "installed plugin checks its own settings, and the pools named for it, with the rest "
        "of the configuration (`config validate` too); errors name the full path.",
        factory=dict)
