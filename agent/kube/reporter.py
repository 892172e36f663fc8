"""Conditions on the Machine's status and Events, kept in the journal until delivered.

`MachineReporter.publish` is an agent.report Reporter. Every call records the latest
state of each condition (coalesced: only the newest per type) and the Events of new
transitions in the journal (its section `reports`, `Reports`), so nothing is lost while the
management cluster is unreachable or across an agent restart; then it delivers:
- `status.conditions` by server-side apply on `/status` under field manager
  `machine-agent` (on v1beta1, `status.v1beta2.conditions`). Apply merges `listType=map`
  entries by `type`, so conditions owned by other managers (CAPI's `Ready`) stay; the
  apply is forced because the agent is the only author of its own condition types.
- Events for transitions to True or False, each once (named by the transition).
Delivery during the run is rate-limited (one write per `interval`, a timer sends what is
left) and never holds the bootstrap up; after a failure it waits a jittered backoff
before trying again, from the timer (nothing waits for the next publish). The final
publish retries until delivered or `final_attempts` run out; what is left stays in the
journal for the next run (the daemon's reporter, `keep_trying`, goes on from its timer),
or for `flush()` when the daemon sees the management cluster answer again. After a 401
(the credentials expired or were revoked) nothing more is sent by this run: each try
would be refused too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import field
from typing import Any

from agent.errors import AgentError
from agent.host import Host
from agent.kube.client import Client
from agent.kube.errors import AlreadyExists, NotFound, Unauthorized
from agent.kube.events import clip, events_path, transition_event
from agent.kube.machine import GROUP, MachineView
from agent.recordtype import record
from agent.report import MAX_MESSAGE, Condition
from agent.retry import Backoff
from agent.state import Journal, Section

log = logging.getLogger(__name__)

DELIVERY_BACKOFF = Backoff(base=1.0, cap=30.0, attempts=8)


@record
class Reports(Section):
    """What was reported to the Machine and what is not delivered yet, kept in the
    journal so a restart or an unreachable cluster loses nothing."""

    KEY = "reports"
    machine: str = ""
    """`namespace/name` of the Machine reported to."""
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The conditions as last recorded, by type (the objects sent)."""
    dirty: bool = False
    """Whether `conditions` is not delivered yet."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Events not created yet, oldest first."""
    evented: dict[str, str] = field(default_factory=dict)
    """`status:reason` last evented, by condition type."""

    @property
    def pending(self) -> bool:
        """Whether something is not delivered yet."""
        return self.dirty or bool(self.events)


class MachineReporter:
    def __init__(self, client: Client, machine: MachineView, journal: Journal, *,
                 host: Host, conditions: bool = True, events: bool = True,
                 interval: float = 5.0, backoff: Backoff = DELIVERY_BACKOFF,
                 final_attempts: int = 8, keep_trying: bool = False) -> None:
        self.client = client
        self.machine = machine
        self.journal = journal
        self.host = host
        """Counts each write to the Machine and its Events as a side effect (the crash
        harness kills the agent right after one)."""
        self.clock = host.clock
        self.send_conditions = conditions
        self.send_events = events
        self.interval = interval
        self.backoff = backoff
        self.final_attempts = final_attempts
        self.keep_trying = keep_trying
        """After the final attempts, go on retrying from the timer (the daemon, which
        outlives the run) instead of leaving the rest to the next run."""
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None
        self._last_send = float("-inf")
        self._not_before = float("-inf")
        self._failures = 0
        self._unauthorized = False
        """Set by a 401: this process's credentials will not be accepted again."""
        self.machine_deleted = False
        """Set by a 404 on the Machine's status: it was deleted; the orchestrator stops
        the run, since no Machine waits for this node any more."""
        self._closed = False
        """Set by close(): a timer that fired meanwhile must not send (the daemon's next
        reporter shares the journal's state)."""
        key = f"{machine.facts.namespace}/{machine.facts.name}"
        state = journal.section(Reports)
        if state.machine != key:
            journal.drop(Reports)
            state = journal.section(Reports)
            state.machine = key
        self.state = state

    @property
    def pending(self) -> bool:
        """Whether something is not delivered yet."""
        return self.state.pending

    def publish(self, conditions: Sequence[Condition], final: bool) -> None:
        with self._lock:
            evented = len(self.state.events)
            self._record(conditions)
            transition = len(self.state.events) > evented
            if final:
                self._cancel_timer()
                self._deliver_final()
            elif self.pending:
                self._deliver_soon()
            # Saved here, on the caller's thread, never from the timer: the orchestrator
            # saves the same journal. A delivery not yet saved is only repeated (apply is
            # idempotent, an Event's name says it was sent). A progress report is saved
            # when losing it would lose something: the final one, a transition's Event
            # not sent yet, or one kept because the cluster did not answer; otherwise the
            # orchestrator's next save carries it (a bootstrap: 6 saves with their fsyncs
            # fewer), and a run after a crash reports its own progress anyway.
            if final or (self.pending and (transition or self._failures)):
                self.journal.save()

    def flush(self) -> bool:
        """Try what is pending now, whatever the backoff said (the management cluster
        just answered again, e.g. a watch reconnected); True when nothing is left. Runs
        on the thread that owns the journal, which it saves."""
        with self._lock:
            if self.pending and not self._stopped:
                self._cancel_timer()
                if not self._try_deliver() and self.keep_trying:
                    self._deliver_soon()
                self.journal.save()
            return not self.pending

    @property
    def _stopped(self) -> bool:
        """No delivery is worth trying: refused credentials, or no Machine any more."""
        return self._unauthorized or self.machine_deleted

    def close(self) -> None:
        """Stop the timer (what is pending stays in the journal)."""
        with self._lock:
            self._closed = True
            self._cancel_timer()

    # -- recording --------------------------------------------------------------------

    def _record(self, conditions: Sequence[Condition]) -> None:
        state = self.state
        for c in conditions:
            entry = {"type": c.type, "status": c.status, "reason": c.reason,
                     "message": clip(c.message, MAX_MESSAGE),
                     "lastTransitionTime": c.last_transition_time,
                     "observedGeneration": self.machine.generation}
            if state.conditions.get(c.type) != entry:
                state.conditions[c.type] = entry
                state.dirty = state.dirty or self.send_conditions
            mark = f"{c.status}:{c.reason}"
            if c.status != "Unknown" and state.evented.get(c.type) != mark:
                state.evented[c.type] = mark
                if self.send_events:
                    state.events.append(transition_event(self.machine, entry))

    # -- delivery ---------------------------------------------------------------------

    def _deliver_soon(self) -> None:
        """Try now if the interval and the backoff allow, else when they do. A try that
        fails for now schedules the next one after its backoff, rather than waiting for
        a publish that may never come (the daemon's final report after an outage)."""
        if self._stopped:
            return
        now = self.clock.monotonic()
        due = max(self._last_send + self.interval, self._not_before)
        if now >= due:
            if self._try_deliver() or not self._failures:
                return  # delivered, or refused for good: nothing to try again
            now = self.clock.monotonic()
            due = max(self._last_send + self.interval, self._not_before)
        if self._timer is None:
            self._timer = threading.Timer(max(0.0, due - now), self._on_timer)
            self._timer.daemon = True
            self._timer.start()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            if self._closed or not self.pending:
                return
            self._deliver_soon()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _deliver_final(self) -> None:
        if self._stopped:
            return
        for attempt in range(self.final_attempts):
            if not self.pending or self._try_deliver(permanent_stops=True):
                return
            if self._failures == 0:  # a permanent refusal: retrying will not help
                break
            if attempt < self.final_attempts - 1:
                self.clock.sleep(max(0.0, self._not_before - self.clock.monotonic()))
        if self.pending and self.keep_trying and self._failures:
            log.warning("the final status is not delivered to Machine %s yet; it is kept "
                        "in the journal and retried in the background",
                        self.state.machine)
            self._deliver_soon()
        elif self.pending:
            log.error("the final status could not be delivered to Machine %s; it is kept "
                      "in the journal and sent by the next run", self.state.machine)

    def _try_deliver(self, permanent_stops: bool = False) -> bool:
        """One attempt at everything pending (each request tried once); True if done."""
        self._last_send = self.clock.monotonic()
        try:
            if self.state.dirty:
                self._apply_status()
                self.state.dirty = False
            while self.state.events:
                self._create_event(self.state.events[0])
                self.state.events.pop(0)
        except AgentError as err:
            if err.temporary:
                self._failures += 1
                pause = self.backoff.delay(min(self._failures, 10))
                if err.retry_after is not None:
                    pause = max(pause, min(err.retry_after, self.backoff.cap))
                self._not_before = self.clock.monotonic() + pause
                log.warning("reporting to the management cluster failed (%s); kept in the "
                            "journal, next try in %.1fs", err, pause)
            elif isinstance(err, NotFound):
                self._failures = 0
                self.machine_deleted = True
                log.error("Machine %s was deleted (its status answers 404): no more "
                          "reports, and no more bootstrapping for it", self.state.machine)
            else:
                self._failures = 0
                self._unauthorized = isinstance(err, Unauthorized)
                log.error("the management cluster refused the report: %s%s", err,
                          "; no more reports are sent by this run, they are kept in the "
                          "journal for the next" if self._unauthorized else "")
            return False
        self._failures = 0
        self._not_before = float("-inf")
        return True

    def _create_event(self, event: dict[str, Any]) -> None:
        try:
            self.client.create(events_path(self.machine.facts.namespace), event, attempts=1)
            self.host.record_effect(f"create Event {event['metadata']['name']}")
        except AlreadyExists:
            pass  # sent before an interruption: the name says it is the same transition
        except AgentError as err:
            if err.temporary:
                raise
            # A refused Event must not hold back the ones after it (or the status).
            log.error("the management cluster refused an Event (dropped): %s", err)

    def _apply_status(self) -> None:
        facts = self.machine.facts
        conditions = sorted(self.state.conditions.values(), key=lambda c: c["type"])
        if self.machine.version == "v1beta1":
            # v1beta1's own status.conditions has no list-map keys (an apply would replace
            # it whole); the v1beta2-shaped conditions live under status.v1beta2.
            status: dict[str, Any] = {"v1beta2": {"conditions": conditions}}
        else:
            status = {"conditions": conditions}
        self.client.apply(self.machine.status_path, {
            "apiVersion": f"{GROUP}/{self.machine.version}", "kind": "Machine",
            "metadata": {"name": facts.name, "namespace": facts.namespace},
            "status": status}, force=True, attempts=1)
        self.host.record_effect(f"apply Machine {facts.namespace}/{facts.name} status")
