"""The result of one check, and what the checks of one run share."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Literal

from agent.errors import REASONS, Reason
from agent.host import Host
from agent.phases.context import PhaseContext, ResultReader, Results
from agent.recordtype import record
from agent.state import Journal, PhaseRecord

if TYPE_CHECKING:
    from agent.config import AgentConfig, LoadedConfig
    from agent.kube.client import Client
    from agent.kube.machine import MachineView

Status = Literal["pass", "warn", "fail"]

log = logging.getLogger("agent.doctor")


@record(frozen=True)
class Check:
    phase: str
    """The area: config, management, network, ipam, time, join, cni, journal."""
    name: str
    """Stable within its phase (docs/doctor.md lists every one)."""
    status: Status
    seen: str
    """What was observed, in a line."""
    fix: str = ""
    """What to do about it; empty when nothing needs doing."""
    details: dict[str, Any] = field(default_factory=dict)
    """Measured values for tooling (offsets, versions, addresses); JSON-able."""

    def line(self) -> str:
        tail = f" — {self.fix}" if self.fix and self.status != "pass" else ""
        return f"{self.status.upper():<5} {self.phase:<10} {self.name}: {self.seen}{tail}"

    def as_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "name": self.name, "status": self.status,
                "seen": self.seen, "fix": self.fix, "details": self.details}


def not_checked(phase: str, name: str, because: str) -> Check:
    """A check that could not be made because an earlier one failed: a warning that
    says which; the earlier failure carries the fix."""
    return Check(phase, name, "warn", f"not checked: {because}",
                 "fix the failing check it depends on first")


def from_last_run(area: str, name: str, record: PhaseRecord, why: str,
                  fix: str = "") -> Check:
    """A failure doctor cannot see live without changing the node, taken from the
    journal's record of the phase's last run: says so, and gives the reason's fix."""
    known = REASONS.get(Reason(record.reason)) if record.reason in set(Reason) else None
    return Check(area, name, "fail", f"not checked live ({why}); the last run failed here at "
                 f"{record.finished_at}: {record.reason}: {record.message}",
                 (fix or (known.fix if known else "see the message")).rstrip(".")
                 + ". Then run `machine-agent run` again.",
                 {"reason": record.reason, "source": "journal"})


@record
class Doctor:
    """What the checks share: the read-only host and what earlier areas found."""

    host: Host
    files: list[str]
    scratch: Host
    """A throw-away Host outside the node's root, for what a library insists on writing
    (key material from a kubeconfig); deleted when the run ends."""
    journal: Journal | None = None
    loaded: LoadedConfig | None = None
    client: Client | None = None
    machine: MachineView | None = None
    management_problem: str | None = None
    """Why the management cluster could not be used, for the checks that need it."""
    phases: Sequence[ResultReader] = ()
    """The phases in pipeline order (the registry's)."""

    @property
    def config(self) -> AgentConfig | None:
        return self.loaded.config if self.loaded is not None else None

    def last_failure(self, phase: str, *reasons: Reason) -> PhaseRecord | None:
        """The journal's record of `phase` if its last run failed with one of `reasons`
        (any reason when none is named)."""
        record = self.journal.phases.get(phase) if self.journal else None
        if record is None or record.state != "failed" or not record.reason:
            return None
        return record if not reasons or record.reason in reasons else None

    def phase_context(self) -> PhaseContext:
        """A PhaseContext as the orchestrator gives `plan`: the read-only host."""
        assert self.loaded is not None
        journal = self.journal if self.journal is not None else Journal(self.host)
        results = Results({p.name: p.result_from(rec.result) for p in self.phases
                           if (rec := journal.phases.get(p.name)) is not None
                           and rec.state == "completed"})
        return PhaseContext(self.loaded.config, self.host, journal, results, _progress, log,
                            self.machine.facts if self.machine else None,
                            management=self.client)


def _progress(message: str, reason: Reason = Reason.InProgress) -> None:
    log.debug("%s", message)
