"""The IPAM backends the conformance suite runs against, behind one small harness.

Each harness builds a plugin as the agent would (through its entry point and checked
settings), names pools for the cases, and says which failure modes it can show.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.host import Host
from agent.ipam.base import IPAMPlugin, PluginEnv, open_plugin


@dataclass
class Harness:
    name: str
    settings: dict[str, Any]
    env: PluginEnv
    pools: dict[str, str]
    """Case → pool name: `v4`, `v6` (at least 20 free addresses), `small` (exactly 3)."""
    small_size: int = 3
    can_fail_auth: bool = False
    can_go_down: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def plugin(self) -> IPAMPlugin:
        return open_plugin(self.name, {self.name: self.settings}, self.env)

    def bad_credentials_plugin(self) -> IPAMPlugin:
        raise NotImplementedError

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        raise NotImplementedError
        yield


def static_harness(tmp_path: Path) -> Harness:
    settings = {"pools": {
        "v4": {"addresses": ["192.0.2.0/24"], "prefix": 24, "gateway": "192.0.2.1",
               "dnsServers": ["192.0.2.53"]},
        "v6": {"addresses": ["2001:db8:10::100-2001:db8:10::1ff"], "prefix": 64,
               "gateway": "2001:db8:10::1"},
        "small": {"addresses": ["198.51.100.1-198.51.100.4"], "prefix": 28,
                  "gateway": "198.51.100.1"},
    }}
    return Harness("static", settings, PluginEnv(Host(tmp_path)),
                   {"v4": "v4", "v6": "v6", "small": "small"})
