"""The one interface every phase implements: plan (pure) → apply (through the Host) → verify.

A plan is a list of `Change`s, each with a stable key, a one-line summary and, for files,
a diff. The default `apply` runs them in order and journals each key, so a run that was
interrupted resumes after the last change it finished instead of repeating it.

A crash can fall between a change and its journal entry. Changes that converge (write
this content) are safe to repeat. A change that is not (append a line, run a command)
gives a `probe`: a fingerprint of what it affects, journaled before it runs; if the
fingerprint moved when the run resumes, the change had happened and is not repeated.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from agent.config import AgentConfig
from agent.config.fields import encode
from agent.errors import Reason
from agent.host import Host
from agent.kube.client import Client
from agent.kube.facts import MachineFacts
from agent.state import Journal


@dataclass(frozen=True)
class Change:
    key: str
    """Stable identity of the change, journaled once applied."""
    summary: str
    """One line for `plan` and the log, e.g. `write /etc/hostname`."""
    action: Callable[[Host], None]
    diff: str = ""
    probe: Callable[[Host], str] | None = None
    """Fingerprint of the state the change affects, for changes not safe to repeat."""
    argv: tuple[str, ...] = ()
    """The command the change runs, if any: `plan` says what becomes of it on an image
    tree (Host.command_disposition: run inside it, deferred to first boot, refused)."""


@dataclass
class PhasePlan:
    phase: str
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the phase would do that is not a local change (e.g. claim from a pool)."""

    @property
    def empty(self) -> bool:
        return not self.changes and not self.notes


class Progress(Protocol):
    def __call__(self, message: str, reason: Reason = Reason.InProgress) -> None:
        """Say what a long wait is waiting for, under `reason` (e.g. TimeSynchronizing)."""


@dataclass
class PhaseContext:
    config: AgentConfig
    host: Host
    journal: Journal
    results: dict[str, dict[str, Any]]
    """What earlier phases produced, by phase name."""
    progress: Progress
    """Say what a long wait is waiting for; reaches the log and the phase's condition."""
    log: logging.Logger
    machine: MachineFacts | None = None
    """The Machine as read from the management cluster; None when run without one."""
    reload_machine: Callable[[], MachineFacts] | None = None
    """Read the Machine (and its bootstrap data) again, e.g. for a fresh bootstrap token
    after the first one expired; None when there is no management cluster to ask."""
    management: Client | None = None
    """The management-cluster client (e.g. for IPAM claims); None without one."""
    show_secrets: bool = False
    """`plan --show-secrets`, asked for at the node: show the bootstrap data's file
    contents and command lines. Otherwise they are secret (credentials ride in them):
    paths, sizes and digests only."""


class Phase:
    """Base of the phases. Subclasses set the class attributes and override `plan`."""

    name: ClassVar[str]
    condition: ClassVar[str]
    """Condition type on the Machine, e.g. `NetworkReady`."""
    success: ClassVar[Reason]

    def inputs(self, config: AgentConfig) -> Any:
        """What the phase depends on; a completed phase with unchanged inputs is skipped."""
        return encode(getattr(config.spec, self.name), redact_secrets=False)

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        """What would change. Pure: `ctx.host` is read-only here."""
        return PhasePlan(self.name)

    def apply(self, ctx: PhaseContext, plan: PhasePlan) -> None:
        """Apply the plan's changes in order, skipping those journaled as done."""
        record = ctx.journal.phases[self.name]
        for change in plan.changes:
            if change.key in record.steps:
                ctx.log.info("already done: %s", change.summary)
                continue
            if change.probe is not None:
                now = change.probe(ctx.host)
                before = record.intents.get(change.key)
                if before is not None and before != now:
                    ctx.log.info("finished before an interruption: %s", change.summary)
                    ctx.journal.step_done(self.name, change.key)
                    continue
                ctx.journal.intend(self.name, change.key, now)
            ctx.log.info("%s", change.summary)
            change.action(ctx.host)
            ctx.journal.step_done(self.name, change.key)

    def still_holds(self, ctx: PhaseContext, result: dict[str, Any]) -> bool:
        """Whether the node still shows what the phase completed with `result`, asked
        before a phase with unchanged inputs is skipped as up to date (a node changed by
        hand is applied again). Local and cheap: a re-run's cost is benchmarked."""
        return True

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> dict[str, Any]:
        """Prove the result; raise an AgentError if it does not hold. Returns the result
        journaled for later phases and `status`."""
        return {}

    def reason(self, result: dict[str, Any]) -> Reason:
        """The condition reason on success; a phase that completed with a warning (e.g.
        time not synchronised but spec.time.onTimeout is warn) names the warning here."""
        return self.success

    def message(self, result: dict[str, Any]) -> str:
        """The condition message on success."""
        return f"{self.name} phase completed"

    def reported(self, result: dict[str, Any]) -> list[tuple[str, Reason, str]]:
        """Further True conditions (type, reason, message) the result establishes, set
        with the phase's own on success."""
        return []


def file_change(host: Host, path: str, content: str, *, mode: int = 0o644) -> Change | None:
    """A change that writes `content` to `path`, with its diff; None when already so."""
    current = host.read_text(path)
    if current == content:
        return None
    diff = "".join(difflib.unified_diff(
        (current or "").splitlines(keepends=True), content.splitlines(keepends=True),
        fromfile=path if current is not None else "/dev/null", tofile=path))

    def write(h: Host) -> None:
        h.write_file(path, content, mode=mode)

    verb = "update" if current is not None else "create"
    return Change(f"write:{path}", f"{verb} {path}", write, diff)
