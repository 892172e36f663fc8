"""The Host port: the one door to side effects (files, commands, services, netlink, clock).

Files are always addressed by their system path (`/etc/chrony/chrony.conf`) and land under
`root`, so a test or an image build points the agent at a temporary tree. Phases never
call `subprocess` or `open()` on system paths themselves; they are handed a Host.

Every side effect is counted. With `crash_after=N` the process kills itself right after
its Nth side effect: the crash harness uses it to prove that a run interrupted anywhere
completes correctly on the next run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agent.host.base import Clock, EffectLog, ReadOnlyHostError
from agent.host.commands import HOST_ONLY, OUTPUT_TAIL, OUTSIDE_SANDBOX_ENV, CommandResult
from agent.host.files import Files
from agent.host.kernel import Kernel
from agent.host.locks import LockBusyError, Locks
from agent.logs import REDACT, Redactor

__all__ = [
    "HOST_ONLY",
    "OUTPUT_TAIL",
    "OUTSIDE_SANDBOX_ENV",
    "Clock",
    "CommandResult",
    "EffectLog",
    "Host",
    "LockBusyError",
    "ReadOnlyHostError",
]


class Host(Files, Locks, Kernel):
    """Real side effects under `root`. `read_only=True` refuses every change."""

    def __init__(
        self,
        root: str | Path = "/",
        *,
        read_only: bool = False,
        clock: Clock | None = None,
        effects: EffectLog | None = None,
        redact: Redactor = REDACT,
        netns: str | None = None,
        env: Mapping[str, str] | None = None,
        image: bool = False,
    ) -> None:
        self.root = Path(root).resolve()
        self.image = image
        """The root is an image tree (the CLI's `--root DIR` without `--netns`): no
        command runs on the host. Each is run in the root (chroot), deferred to the
        node's first boot, or refused: `command_disposition` says which."""
        self.read_only = read_only
        self.clock = clock or Clock()
        self.effects = effects or EffectLog()
        self.redact = redact
        self.netns = netns
        """Network namespace the node's links live in (None: the agent's own)."""
        self.env = dict(env or {})
        """Extra environment for commands (e.g. PATH to site binaries)."""

    def read_only_view(self) -> Host:
        """The same host, refusing changes: what `plan` and `doctor` are handed."""
        return Host(self.root, read_only=True, clock=self.clock, effects=self.effects,
                    redact=self.redact, netns=self.netns, env=self.env, image=self.image)
