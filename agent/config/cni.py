"""`spec.cni`: the container network plugins and their configuration."""

from __future__ import annotations

from dataclasses import dataclass

from agent.config import checks
from agent.config.fields import setting


@dataclass(frozen=True)
class CNISpec:
    bin_dir: str = setting("Directory of the plugin binaries.", default="/opt/cni/bin",
                           check=checks.absolute_path)
    conf_dir: str = setting("Directory of the network configuration lists.",
                            default="/etc/cni/net.d", check=checks.absolute_path)
