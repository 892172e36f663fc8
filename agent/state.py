"""The state journal: what each phase did, so a crash or reboot resumes instead of repeats.

One JSON file under the state directory, replaced atomically on every change (temp file,
fsync, rename through the Host), so it is always either the old or the new version.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from agent.errors import StateError
from agent.host import Host

STATE_DIR = "/var/lib/machine-agent"
JOURNAL = f"{STATE_DIR}/journal.json"
FORMAT = 1

PhaseState = Literal["started", "completed", "failed"]


def digest(value: Any) -> str:
    """A stable digest of a phase's inputs (any JSON-able value)."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class PhaseRecord:
    phase: str
    state: PhaseState
    digest: str
    started_at: str
    finished_at: str | None = None
    attempts: int = 1
    steps: list[str] = field(default_factory=list)
    """Keys of the changes applied so far for this digest (for resuming mid-phase)."""
    intents: dict[str, str] = field(default_factory=dict)
    """Changes about to run, with the fingerprint of their target before they ran."""
    reason: str | None = None
    message: str | None = None
    result: dict[str, Any] = field(default_factory=dict)
    """What the phase produced that others or `status` need (e.g. the address claimed)."""


@dataclass
class Journal:
    host: Host
    phases: dict[str, PhaseRecord] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    """Other components' durable state (e.g. reports not yet delivered), by owner."""
    _written: str | None = field(default=None, init=False, repr=False, compare=False)
    """What the file holds (as read or last written): a save that would write the same
    is skipped, with its fsyncs."""

    @classmethod
    def load(cls, host: Host) -> Journal:
        try:
            text = host.read_text(JOURNAL)
        except OSError as err:
            raise StateError(f"cannot read the journal {JOURNAL}: {err.strerror}") from err
        journal = cls(host)
        if text is None:
            return journal
        try:
            doc = json.loads(text)
            journal.phases = {name: PhaseRecord(**rec) for name, rec in doc["phases"].items()}
            journal.extra = doc.get("extra", {})
            journal._written = text
        except (ValueError, KeyError, TypeError) as err:
            raise StateError(
                f"the journal {JOURNAL} is unreadable ({err})",
                hint="move it aside to start over; the agent re-plans from the host's state",
            ) from err
        return journal

    def save(self) -> None:
        doc = {"format": FORMAT, "phases": {n: asdict(r) for n, r in self.phases.items()},
               "extra": self.extra}
        text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
        if text == self._written:
            return
        self.host.write_file(JOURNAL, text, mode=0o600, dir_mode=0o700)
        self._written = text

    def record(self, phase: str) -> PhaseRecord | None:
        return self.phases.get(phase)

    def is_current(self, phase: str, inputs_digest: str) -> bool:
        rec = self.phases.get(phase)
        return rec is not None and rec.state == "completed" and rec.digest == inputs_digest

    def start(self, phase: str, inputs_digest: str) -> PhaseRecord:
        """Begin (or resume) a phase. Steps done for the same inputs are kept."""
        now = self._now()
        old = self.phases.get(phase)
        if old is not None and old.digest == inputs_digest and old.state != "completed":
            old.state, old.attempts, old.finished_at = "started", old.attempts + 1, None
            old.reason = old.message = None
            rec = old
        else:
            rec = PhaseRecord(phase, "started", inputs_digest, started_at=now)
        self.phases[phase] = rec
        self.save()
        return rec

    def intend(self, phase: str, key: str, fingerprint: str) -> None:
        self.phases[phase].intents[key] = fingerprint
        self.save()

    def step_done(self, phase: str, key: str) -> None:
        rec = self.phases[phase]
        rec.steps.append(key)
        rec.intents.pop(key, None)
        self.save()

    def complete(self, phase: str, result: dict[str, Any]) -> None:
        rec = self.phases[phase]
        rec.state, rec.finished_at, rec.result = "completed", self._now(), result
        rec.reason = rec.message = None
        rec.steps, rec.intents = [], {}
        self.save()

    def fail(self, phase: str, reason: str, message: str) -> None:
        rec = self.phases[phase]
        rec.state, rec.finished_at, rec.reason, rec.message = "failed", self._now(), reason, message
        self.save()

    def _now(self) -> str:
        return self.host.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
