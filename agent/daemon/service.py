"""The long-running service (`machine-agent daemon`): bootstrap, tell systemd, then follow
the Machine until stopped, making no wake-ups while nothing happens.

The main thread runs the bootstrap, then blocks on one queue of events, handled one at a
time. Signal handlers put `Stop` on it (a SimpleQueue: its put() is safe from a signal
handler, unlike a Lock or an Event's). The watches of the Machine and of its AgentConfig
(agent.daemon.watching) put the versions they see on the same queue from their own
threads; they are blocked in a read between changes, so an idle daemon does not run.

What the events lead to:
- a bootstrap that failed for a temporary reason, or could not start (`StartAgain`):
  tried again after a jittered pause that grows to 5 minutes, resuming from the journal;
- the management cluster answers again after an outage (`Recovered`): the reports kept
  in the journal meanwhile are sent at once;
- the Machine is being deleted (`deletionTimestamp`) and CAPI, done draining it, waits
  on the agent's pre-terminate hook: the delete policy (agent.daemon.deletion), tried
  again like the bootstrap after a temporary failure, then the hook taken off;
- the AgentConfig changed (the object's content, or the annotation naming another):
  on a bootstrapped node, the phases of spec.lifecycle.reconfigure are planned and
  applied again (agent.daemon.reconfigure), join never is; on a node that has not
  bootstrapped (a phase failed for good, or the object was invalid), the whole bootstrap
  runs again with it.

An invalid configuration: when the mistake is in the Machine's ConfigMap or Secret, the
Machine and the client are known, so it is reported there (AgentConfigApplied False
ConfigInvalid, every error with its path; NodeBootstrapped too, unless the node has
already joined) and the daemon stays, watching the object for the fix. A mistake in the
node's own files exits with status 2: only someone at the node can fix it, and then
restarts the unit (RestartPreventExitStatus=2).

SIGTERM while the main thread works (the bootstrap, a reconfiguration, the delete policy)
unwinds that work at once, like KeyboardInterrupt: every journal write is atomic (temp
file, fsync, rename), so the journal is the old or the new version, and the next start
resumes where this one stopped (tests/integration/test_crash_resume.py proves resuming
from any point). The watches are stopped by shutting their connections down, so a read
blocked in the kernel returns at once.
"""

from __future__ import annotations

import functools
import logging
import queue
import signal
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from agent.daemon.delete_lifecycle import (
    CredentialCheck,
    DeleteAgain,
    DeleteLifecycle,
    publisher,
    put_after,
)
from agent.daemon.deletion import cleaned_up
from agent.daemon.drift import Drift, DriftWatch
from agent.daemon.reconfigure import CONDITION, applied, bootstrapped, reconfigure, source_name
from agent.daemon.watching import CONFIG, MACHINE, Watches
from agent.errors import AgentError, ConfigError, Reason
from agent.host import Host
from agent.kube.follow import Recovered, Update
from agent.kube.machine import MachineInvalid, machine_shape
from agent.kube.machine_config import ConfigRef, ManagementSource, config_ref
from agent.kube.reporter import MachineReporter
from agent.orchestrator import EXIT_OK, EXIT_USAGE, Orchestrator
from agent.phases.base import Phase
from agent.recordtype import record
from agent.report import SUMMARY, Conditions, LocalStatus, Reporter, last_outcome
from agent.retry import Backoff
from agent.session import Session
from agent.state import node_lock
from agent.systemd import Notifier, SystemdReporter, Watchdog

log = logging.getLogger("agent.daemon")  # the name service logs are known by

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopping(BaseException):
    """A stop signal arrived while the main thread was at work (a BaseException: no
    `except Exception` in a phase or the orchestrator may swallow it)."""


@record(frozen=True)
class Stop:
    signum: int


@record(frozen=True)
class StartAgain:
    """Time to try the bootstrap again: the management cluster could not be read, or a
    phase failed for a reason that may pass."""


Event = Stop | StartAgain | DeleteAgain | CredentialCheck | Update | Recovered | Drift


class Daemon:
    def __init__(
        self,
        host: Host,
        config_files: Sequence[str] = (),
        *,
        notifier: Notifier | None = None,
        watchdog: Watchdog | None = None,
        phases: list[Phase] | None = None,
        cloud_init_wait: float | None = None,
    ) -> None:
        self.host = host
        self.config_files = list(config_files)
        self.cloud_init_wait = cloud_init_wait
        self.notifier = notifier
        self.watchdog = watchdog
        self.phases = phases
        self.events: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._busy = False
        self.reporters: list[Reporter] = [LocalStatus(host)]
        if notifier is not None:
            self.reporters.append(SystemdReporter(notifier))
        self.session: Session | None = None
        self.orchestrator: Orchestrator | None = None
        self.watches: Watches | None = None
        self._start_failures = 0
        self.deleting = DeleteLifecycle(host, self.events.put,
                                        lambda: (self.session, self.orchestrator))
        """The pre-terminate hook and the delete policy."""
        self._changed: str | None = None
        """The configuration change a bootstrap tried again later is for."""
        self.drift = DriftWatch(host, self.events.put)
        """The kernel's announcements of changed links, addresses and routes."""

    def run(self) -> int:
        """Bootstrap, then serve until SIGTERM/SIGINT. 0 on a requested stop (the
        bootstrap's result is on the conditions), 2 when the configuration is invalid."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}
        if self.watchdog is not None:
            self.watchdog.start()
        try:
            code = self._work(self._bootstrap, "the bootstrap")
            if code is None:
                return EXIT_OK
            if code != EXIT_OK:
                return code
            self._serve()
            return EXIT_OK
        finally:
            self._busy = False
            self.deleting.let_go()
            if self.watches is not None:
                self.watches.stop()
            self.drift.stop()
            self._close_reporters()
            if self.notifier is not None:
                self.notifier.send("STOPPING=1")
            if self.watchdog is not None:
                self.watchdog.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.events.put(Stop(signum))
        if self._busy:
            self._busy = False  # a second signal must not unwind the unwinding
            raise Stopping(signum)

    def _work(self, job: Callable[[], int], what: str) -> int | None:
        """Run `job` on the main thread, unwound by a stop signal (then None)."""
        try:
            self._busy = True
            return job()
        except Stopping:
            log.info("stopped during %s; the next start resumes from the journal", what)
            return None
        finally:
            self._busy = False

    # -- the bootstrap ------------------------------------------------------------------

    def _bootstrap(self, changed: str | None = None) -> int:
        """Open the session and run the phases; `changed` names the configuration
        object whose change asked for this run (a node that had not bootstrapped).
        Under the node lock: a `run` by hand waits for it, and it for the `run`."""
        with node_lock(self.host, "daemon (bootstrap)"):
            return self._bootstrap_locked(changed)

    def _bootstrap_locked(self, changed: str | None) -> int:
        from agent.session import MachineConfigInvalid, open_session

        changed, self._changed = changed or self._changed, None
        # A run starts: the outcome in the status file (perhaps from the boot before) is
        # no longer the one `status --wait` waits for, though opening the session can
        # take minutes (cloud-init, the bootstrap data).
        last = last_outcome(self.host)
        if last is not None and last[1]:
            LocalStatus(self.host).publish(last[0], final=False)
        try:
            session = open_session(self.host, self.config_files,
                                   cloud_init_wait=self.cloud_init_wait)
        except MachineConfigInvalid as err:
            # The node's own configuration is valid, so the Machine and the client are
            # known: the mistake goes onto the Machine, and the daemon stays to watch
            # the ConfigMap or Secret for the fix (agent.daemon.reconfigure).
            log.error("the Machine's configuration is refused; waiting for it to be "
                      "fixed: %s", err)
            self.session = err.session
            orchestrator = self._orchestrator(err.session)
            machine = err.session.machine
            name = changed or source_name(machine.config if machine else None)
            orchestrator.conditions.set(CONDITION, "False", Reason.ConfigInvalid,
                                        f"{name}: {err}")
            if not bootstrapped(orchestrator):
                orchestrator.conditions.set(SUMMARY, "False", Reason.ConfigInvalid, str(err))
            # else: a joined node keeps working as it is, and its readiness gate stays
            # (as when a change is refused while running).
            publisher(orchestrator)(True)
            self._start_watching()
            return EXIT_OK
        except ConfigError as err:
            # A local source: only someone at the node can fix it (then restarts the
            # unit, which does not restart on its own after exit status 2).
            log.error("%s", err)
            self._report_summary(Reason.ConfigInvalid, str(err))
            return EXIT_USAGE
        except AgentError as err:  # e.g. the management cluster stayed unreachable
            log.error("cannot start the bootstrap: %s", err)
            self._report_summary(err.reason, str(err))
            if err.temporary:
                self._changed = changed
                self._start_again_later()
            return EXIT_OK
        self.session = session
        orchestrator = self._orchestrator(session)
        machine = session.machine
        if machine is not None and cleaned_up(orchestrator.journal, machine.facts.uid):
            log.info("Machine %s/%s was deleted and this node cleaned up: no bootstrap",
                     machine.facts.namespace, machine.facts.name)
            publisher(orchestrator)(True)  # READY=1 with the outcome known so far
        elif machine is not None and machine.deletion_timestamp:
            log.info("Machine %s/%s is being deleted (since %s): no bootstrap",
                     machine.facts.namespace, machine.facts.name, machine.deletion_timestamp)
            publisher(orchestrator)(True)
        else:
            self.deleting.hold_while_running()  # a Machine deleted meanwhile is held
            if changed is None and machine is not None and machine.config is not None \
                    and machine.config.text is not None and bootstrapped(orchestrator):
                # A joined node whose daemon starts (a reboot, an upgrade) applies its
                # AgentConfig object as it is now, perhaps changed while it was down by
                # an in-place update that waits for this report.
                changed = machine.config.label
            # After a change, AgentConfigApplied goes out with the final report.
            result = orchestrator.run(summarize=changed is None)
            if changed is not None:
                applied(orchestrator, changed, result)
                orchestrator.summarize()
            summary = orchestrator.conditions.get(SUMMARY)
            log.info("bootstrap finished: %s (%s); serving until stopped",
                     "ok" if result.ok else "not complete", summary.message)
            if result.ok:
                self._start_failures = 0
            elif result.temporary:
                # The phase's own retries ran out on something that may pass (an IPAM
                # backend or the API down for a while): a node left there would never
                # join without a restart, so the whole bootstrap is tried again later
                # (and says again how the change it runs for went).
                self._changed = changed
                self._start_again_later()
            if result.ok:
                self.drift.start(session.loaded.config)
        self._start_watching()
        return EXIT_OK

    def _orchestrator(self, session: Session) -> Orchestrator:
        """An orchestrator for `session` that reports where the daemon reports, replacing
        the one before (whose reports were saved in the journal it shares)."""
        self._close_reporters()
        orchestrator = session.orchestrator(self.host, phases=self.phases,
                                            background_delivery=True)
        orchestrator.reporters.extend(r for r in self.reporters
                                      if not isinstance(r, LocalStatus))
        self.orchestrator = orchestrator
        return orchestrator

    def _close_reporters(self) -> None:
        """Stop the background delivery and save what it did (the timer thread never
        saves the journal; once closed, it no longer touches it)."""
        if self.orchestrator is not None:
            for reporter in self.orchestrator.reporters:
                if isinstance(reporter, MachineReporter):
                    reporter.close()
                    self.orchestrator.journal.save()

    def _start_again_later(self) -> None:
        self._start_failures += 1
        pause = START_BACKOFF.delay(min(self._start_failures, 10))
        put_after(self.events.put, pause, StartAgain())
        log.info("trying the bootstrap again in %.0fs", pause)

    def _report_summary(self, reason: Reason, message: str) -> None:
        """Say why the bootstrap could not start, where `status` and systemd look."""
        last = last_outcome(self.host)
        conditions = Conditions(self.host, [], last[0] if last else None)
        conditions.set(SUMMARY, "False", reason, message)
        for reporter in self.reporters:
            reporter.publish(conditions.all(), final=True)

    def _start_watching(self) -> None:
        if self.watches is not None:  # a bootstrap tried again: follow its session
            self.watches.stop()
            self.watches = None
        session = self.session
        if session is None or session.machine is None or session.client is None:
            return
        lifecycle = session.loaded.config.spec.lifecycle
        self.deleting.hold_while_running()
        if not lifecycle.watch:
            return
        self.watches = Watches(session.client, session.machine, self.events.put)
        self.watches.start(session.machine.config_ref)

    # -- serving ------------------------------------------------------------------------

    def _serve(self) -> None:
        """Handle events until a stop: no timers, no polling."""
        while True:
            event = self.events.get()
            if isinstance(event, Stop):
                log.info("stopping on %s", signal.Signals(event.signum).name)
                return
            what = f"handling {type(event).__name__} ({getattr(event, 'source', '')})"
            if self._work(functools.partial(self._handle, event), what) is None:
                return

    def _handle(self, event: Event) -> int:
        if isinstance(event, StartAgain):
            return self._bootstrap()
        if isinstance(event, DeleteAgain):
            self.deleting.again()
        elif isinstance(event, CredentialCheck):
            self.deleting.check_credential()
        elif isinstance(event, Recovered):
            self._flush_reports()
        elif isinstance(event, Drift) and self.session and self.orchestrator:
            with node_lock(self.host, "daemon (drift)"):
                self.drift.handle(self.orchestrator, self.session.loaded.config)
        elif isinstance(event, Update) and event.source == MACHINE:
            self._on_machine(event.obj)
        elif isinstance(event, Update) and event.source == CONFIG:
            self._on_config(event.obj)
        return EXIT_OK

    def _flush_reports(self) -> None:
        for reporter in self.orchestrator.reporters if self.orchestrator else []:
            if isinstance(reporter, MachineReporter) and reporter.pending:
                log.info("the management cluster answers again: sending the reports kept "
                         "in the journal")
                reporter.flush()

    def _on_machine(self, obj: dict[str, Any] | None) -> None:
        session, orchestrator = self.session, self.orchestrator
        assert session is not None and session.machine is not None
        assert orchestrator is not None
        if obj is None:
            log.info("Machine %s/%s is gone", session.machine.facts.namespace,
                     session.machine.facts.name)
            self.deleting.gone()
            return
        try:
            meta = machine_shape(obj)
        except MachineInvalid as err:
            log.warning("%s; ignored until it is corrected", err.message)
            return
        if meta.uid != session.machine.facts.uid:
            return  # a new Machine of the same name is not this node's
        if meta.deletion_timestamp:
            if self.watches is not None:
                self.watches.follow_config(None)  # no reconfiguration of a node going away
            self.deleting.on_delete(obj)
            return
        ref = config_ref(session.machine.facts.namespace, session.machine.facts.name,
                         meta.annotations)
        if self.watches is not None and isinstance(ref, ConfigRef | None):
            self.watches.follow_config(ref)
        if not isinstance(ref, ConfigRef):
            self._reconfigure(ref)  # no annotation any more, or a malformed one

    def _on_config(self, obj: dict[str, Any] | None) -> None:
        ref = self.watches.config_ref if self.watches else None
        if ref is not None:
            self._reconfigure(ref.source(obj))

    def _reconfigure(self, source: ManagementSource | None) -> None:
        with node_lock(self.host, "daemon (reconfigure)"):
            self._reconfigure_locked(source)

    def _reconfigure_locked(self, source: ManagementSource | None) -> None:
        assert self.session is not None and self.orchestrator is not None
        machine = self.session.machine
        if machine is not None and source != machine.config and \
                not bootstrapped(self.orchestrator):
            changed = source_name(source)
            log.info("the configuration from %s changed on a node that has not "
                     "bootstrapped: running the whole bootstrap again with it", changed)
            self._bootstrap(changed)
            return
        self.session, self.orchestrator = reconfigure(
            self.host, self.session, source, self._orchestrator, self.orchestrator)


START_BACKOFF = Backoff(base=2.0, cap=300.0, attempts=0)
"""Pauses before another bootstrap after a temporary failure."""
