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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic

from agent.config import AgentConfig
from agent.config.fields import Decoder, Problem
from agent.errors import ConfigError, Reason
from agent.host import Host
from agent.phases.checks import Check, Doctor

# What a phase is given and proves, defined apart (agent/phases/context.py: the doctor's
# types need them without this interface) and part of the interface: phases import them
# from here.
from agent.phases.context import PhaseContext as PhaseContext
from agent.phases.context import PhaseResult as PhaseResult
from agent.phases.context import Progress as Progress
from agent.phases.context import R
from agent.phases.context import Results as Results
from agent.phases.facts import Fact
from agent.records import to_json


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


class PhaseOf(Generic[R]):
    """Base of the phases, whose result is an `R`. Subclasses set the class attributes
    and override `plan` (and `verify`, returning their result).

    A phase is listed once, in agent/phases/registry.py (or, from another package, in
    the entry point group it names); everything else learns the phases from there."""

    name: ClassVar[str]
    condition: ClassVar[str]
    """Condition type on the Machine, e.g. `NetworkReady`."""
    success: ClassVar[Reason] = Reason.Completed
    """The condition's reason on success; a built-in phase has its own in errors.py."""
    provides: ClassVar[tuple[type[Fact], ...]] = ()
    """The kinds of facts its result establishes (`PhaseResult.facts()`)."""
    needs: ClassVar[tuple[type[Fact], ...]] = ()
    """The kinds of facts it relies on: the phases that provide them run before it (the
    registry refuses an order that puts one after, or a need no phase provides)."""
    after: ClassVar[str] = ""
    """For a phase added as a plugin: the phase it runs after (empty: after the built-in
    ones). The built-in phases run in the registry's order."""
    reconfigurable: ClassVar[bool] = False
    """Whether the daemon may apply it again on a running node when the configuration
    changes (spec.lifecycle.reconfigure)."""
    also_reports: ClassVar[tuple[tuple[str, str], ...]] = ()
    """Further conditions the phase sets (`reported`), with what each means (the docs)."""
    Settings: ClassVar[type | None] = None
    """For a phase added as a plugin: the dataclass of its settings, spec.phases.<name>.
    A built-in phase's settings are its own section of AgentSpec, spec.<name>."""
    Result: type[Any] = PhaseResult
    """The dataclass of what the phase proves (`verify`): R, a PhaseResult. (A class
    attribute cannot be typed with R; `result_from` and `verify` are.)"""

    def result_from(self, doc: dict[str, Any]) -> R:
        """The result as the journal holds it (also one an earlier version wrote)."""
        result: R = self.Result.from_json(doc)
        return result

    def section(self, config: AgentConfig) -> Any:
        """This phase's settings: spec.<name>, or a plugin's decoded spec.phases.<name>
        (None for a plugin that takes none)."""
        if self.Settings is None:
            return getattr(config.spec, self.name, None)
        decoder = Decoder()
        settings = decoder.decode(self.Settings, config.spec.phases.get(self.name, {}),
                                  f"spec.phases.{self.name}")
        if decoder.errors:  # checked when the configuration was loaded: not reached
            raise ConfigError(decoder.errors)
        return settings

    def settings_problems(self, raw: dict[str, Any]) -> Iterator[Problem]:
        """What is wrong with a plugin's spec.phases.<name> (checked at load time)."""
        if self.Settings is None:
            return
        decoder = Decoder()
        decoder.decode(self.Settings, raw, f"spec.phases.{self.name}")
        for err in decoder.errors:
            yield err.path, err.message, err.hint

    def inputs(self, config: AgentConfig) -> Any:
        """What the phase depends on; a completed phase with unchanged inputs is skipped."""
        return to_json(self.section(config))

    def doctor_checks(self, doctor: Doctor) -> Iterator[Check]:
        """`machine-agent doctor`'s read-only checks of this phase (its area is the
        phase's name); what the doctor knows of a phase is this and the class."""
        return iter(())

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

    def still_holds(self, ctx: PhaseContext, result: R) -> bool:
        """Whether the node still shows what the phase completed with `result`, asked
        before a phase with unchanged inputs is skipped as up to date (a node changed by
        hand is applied again). Local and cheap: a re-run's cost is benchmarked."""
        return True

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> R:
        """Prove the result; raise an AgentError if it does not hold. Returns the result
        journaled for later phases and `status`."""
        result: R = self.Result()
        return result

    def reason(self, result: R) -> Reason:
        """The condition reason on success; a phase that completed with a warning (e.g.
        time not synchronised but spec.time.onTimeout is warn) names the warning here."""
        return self.success

    def message(self, result: R) -> str:
        """The condition message on success."""
        return f"{self.name} phase completed"

    def reported(self, result: R) -> list[tuple[str, Reason, str]]:
        """Further True conditions (type, reason, message) the result establishes, set
        with the phase's own on success."""
        return []


Phase = PhaseOf[Any]
"""Any phase, whatever its result (the orchestrator, the registry, the doctor)."""


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
