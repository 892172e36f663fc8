"""Whether the phase sees the node's own kernel (the plan and doctor compare live)."""

from __future__ import annotations

from pathlib import Path

from agent.host import Host


def is_live(host: Host) -> bool:
    """The Host is the node's root, or names a network namespace: links are observed."""
    return host.netns is not None or host.root == Path("/")
