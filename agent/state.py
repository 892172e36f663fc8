"""The state journal: what each phase did, so a crash or reboot resumes instead of repeats.

One JSON file under the state directory, replaced atomically on every change (temp file,
fsync, rename through the Host), so it is always either the old or the new version.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, field
from typing import Any, ClassVar, Literal, TypeVar

from agent import records
from agent.errors import StateError
from agent.host import Host
from agent.recordtype import record

STATE_DIR = "/var/lib/machine-agent"
JOURNAL = f"{STATE_DIR}/journal.json"
FORMAT = 1
NODE_LOCK = f"{STATE_DIR}/node.lock"
"""Held by every command that changes the node (run, reset, the daemon's bootstrap,
reconfiguration and delete policy): two of them at once undo each other's work (a second
kubeadm's preflight fails on the first one's files, and its `kubeadm reset` deletes them).
Read-only commands (status, plan, doctor, config) never take it."""

log = logging.getLogger(__name__)

WRITTEN_DIRS = (
    "/etc", "/etc/machine-agent", "/etc/systemd/network", "/etc/netplan",
    "/etc/systemd/resolved.conf.d", "/etc/systemd/timesyncd.conf.d", "/etc/chrony",
    "/etc/chrony/sources.d", "/etc/cloud/cloud.cfg.d", "/etc/cni/net.d", "/etc/kubernetes",
    "/etc/kubernetes/pki", "/run/kubeadm", "/run/cluster-api", "/run/machine-agent",
    "/run/machine-agent/kube", STATE_DIR, f"{STATE_DIR}/credentials", f"{STATE_DIR}/ipam",
    f"{STATE_DIR}/kept-files", f"{STATE_DIR}/kept-release", "/var/lib/kubelet",
)
"""Directories the agent writes files into (atomically: a temp file, then a rename); a
kill in between leaves the temp file, which `clean_temp_files` removes on the next start."""
WRITTEN_PARENTS = ("/run/machine-agent/workload",)
"""Directories whose subdirectories the agent writes files into (one per workload
kubeconfig: its credentials as files, agent.kube.workload)."""

PhaseState = Literal["started", "completed", "failed"]


@contextlib.contextmanager
def node_lock(host: Host, command: str, *, wait: bool = True,
              on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the node-wide lock while `command` changes the node. When another process
    holds it: with `wait`, say so through `on_wait` (default: the log) and wait for it;
    without, raise LockBusyError naming the holder's pid."""

    def busy(holder: str) -> bool:
        if wait:
            message = (f"waiting for another command changing this node to finish "
                       f"({holder or 'holder unknown'})")
            (on_wait or log.warning)(message)
        return wait

    outermost = not host.holds_lock(NODE_LOCK)
    with host.lock(NODE_LOCK, holder=f"pid {os.getpid()}: machine-agent {command}",
                   on_busy=busy):
        if outermost:
            host.make_dir(STATE_DIR, 0o700)  # an older version's 0755 is tightened
            clean_temp_files(host)  # no other writer now: what is left is a killed run's
        yield


def clean_temp_files(host: Host) -> None:
    """Remove what killed runs left of their atomic writes; under the node lock only."""
    nested = [f"{parent}/{name}" for parent in WRITTEN_PARENTS
              for name in host.list_dir(parent) if host.is_real_dir(f"{parent}/{name}")]
    for directory in (*WRITTEN_DIRS, *nested):
        for name in host.remove_stale_temp_files(directory):
            log.info("removed %s/%s, left by an interrupted write", directory, name)


def digest(value: Any) -> str:
    """A stable digest of a phase's inputs (any JSON-able value)."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


@record
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


@record
class Section:
    """Base of one component's durable state in the journal (reports not yet delivered,
    the IPAM addresses claimed, the delete policy's steps, ...): a dataclass whose fields
    all have defaults, under its own `KEY`, read and written as agent/records.py does."""

    KEY: ClassVar[str]

    def to_json(self) -> Any:
        return records.to_json(self)

    @classmethod
    def from_json(cls: type[S], doc: Any) -> S:
        return records.from_json(cls, doc)


S = TypeVar("S", bound=Section)


@record
class Journal:
    host: Host
    phases: dict[str, PhaseRecord] = field(default_factory=dict)
    stored: dict[str, Any] = field(default_factory=dict)
    """Sections as the file holds them (JSON), until their owner asks (`section`); kept
    as they are when no component of this version owns them."""
    sections: dict[str, Section] = field(default_factory=dict)

    def section(self, kind: type[S]) -> S:
        """The section `kind` (read from the file, or new): the journal's own object, so
        a change to it is saved with the journal's next `save()`."""
        found = self.sections.get(kind.KEY)
        if not isinstance(found, kind):
            found = kind.from_json(self.stored.get(kind.KEY, {}))
            self.sections[kind.KEY] = found
        return found

    def drop(self, kind: type[Section]) -> None:
        """Forget the section `kind` (saved with the next `save()`)."""
        self.sections.pop(kind.KEY, None)
        self.stored.pop(kind.KEY, None)
    _written: str | None = field(default=None, init=False, repr=False, compare=False)
    """What the file holds (as read or last written): a save that would write the same
    is skipped, with its fsyncs."""

    @classmethod
    def load(cls, host: Host) -> Journal:
        try:
            text = host.read_text(JOURNAL)
        except OSError as err:
            raise StateError(f"cannot read the journal {JOURNAL}: {err.strerror}") from err
        except UnicodeDecodeError as err:
            raise StateError(f"the journal {JOURNAL} is unreadable (not UTF-8 text)",
                             hint="move it aside to start over; the agent re-plans from "
                                  "the host's state") from err
        journal = cls(host)
        if text is None:
            return journal
        try:
            doc = records.loads(text)
            journal.phases = {name: PhaseRecord(**rec) for name, rec in doc["phases"].items()}
            # "extra": the sections' name in the file since format 1, kept so that a node
            # upgraded in place (or downgraded) reads what the other version wrote
            journal.stored = dict(doc.get("extra", {}))
            journal._written = text
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise StateError(
                f"the journal {JOURNAL} is unreadable ({err})",
                hint="move it aside to start over; the agent re-plans from the host's state",
            ) from err
        return journal

    def save(self) -> None:
        extra = {**self.stored, **{k: s.to_json() for k, s in self.sections.items()}}
        doc = {"format": FORMAT, "phases": {n: asdict(r) for n, r in self.phases.items()},
               "extra": extra}
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

    def retrying(self, phase: str) -> None:
        """One more attempt within the run (the retry helper's): counted with the runs',
        so `status --long` and the metrics say how often the phase was tried."""
        self.phases[phase].attempts += 1
        self.save()

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
