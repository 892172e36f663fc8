"""The long-running service (`machine-agent daemon`): bootstrap, tell systemd, then stay
until stopped, making no wake-ups while nothing happens.

The main thread runs the bootstrap, then blocks on one queue of events. Signal handlers
put `Stop` on it (a SimpleQueue: its put() is safe from a signal handler, unlike a Lock
or an Event's). The management-cluster watchers (the Machine, its AgentConfig) will put
their events on the same queue from their own threads, to be handled here one at a time.

SIGTERM during the bootstrap unwinds it at once, like KeyboardInterrupt: every journal
write is atomic (temp file, fsync, rename), so the journal is the old or the new version,
and the next start resumes where this one stopped (tests/integration/test_crash_resume.py
proves resuming from any point).
"""

from __future__ import annotations

import logging
import queue
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType

from agent.errors import AgentError, ConfigError, Reason
from agent.host import Host
from agent.orchestrator import EXIT_OK, EXIT_USAGE
from agent.phases.base import Phase
from agent.report import SUMMARY, Conditions, LocalStatus, Reporter, read_status
from agent.systemd import Notifier, SystemdReporter, Watchdog

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopping(BaseException):
    """A stop signal arrived during the bootstrap (a BaseException: no `except Exception`
    in a phase or the orchestrator may swallow it)."""


@dataclass(frozen=True)
class Stop:
    signum: int


class Daemon:
    def __init__(
        self,
        host: Host,
        config_files: Sequence[str] = (),
        *,
        notifier: Notifier | None = None,
        watchdog: Watchdog | None = None,
        phases: list[Phase] | None = None,
    ) -> None:
        self.host = host
        self.config_files = list(config_files)
        self.notifier = notifier
        self.watchdog = watchdog
        self.phases = phases
        self.events: queue.SimpleQueue[Stop] = queue.SimpleQueue()
        self._bootstrapping = False
        self.reporters: list[Reporter] = [LocalStatus(host)]
        if notifier is not None:
            self.reporters.append(SystemdReporter(notifier))

    def run(self) -> int:
        """Bootstrap, then serve until SIGTERM/SIGINT. 0 on a requested stop (the
        bootstrap's result is on the conditions), 2 when the configuration is invalid."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}
        if self.watchdog is not None:
            self.watchdog.start()
        try:
            try:
                self._bootstrapping = True
                code = self._bootstrap()
                self._bootstrapping = False
            except Stopping:
                log.info("stopped during the bootstrap; the next start resumes from the "
                         "journal")
                return EXIT_OK
            if code != EXIT_OK:
                return code
            self._serve()
            return EXIT_OK
        finally:
            self._bootstrapping = False
            if self.notifier is not None:
                self.notifier.send("STOPPING=1")
            if self.watchdog is not None:
                self.watchdog.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.events.put(Stop(signum))
        if self._bootstrapping:
            self._bootstrapping = False  # a second signal must not unwind the unwinding
            raise Stopping(signum)

    def _bootstrap(self) -> int:
        from agent.session import open_session

        try:
            session = open_session(self.host, self.config_files)
        except ConfigError as err:
            log.error("%s", err)
            self._report_summary(Reason.ConfigInvalid, str(err))
            return EXIT_USAGE
        except AgentError as err:  # e.g. the management cluster stayed unreachable
            log.error("cannot start the bootstrap: %s", err)
            self._report_summary(err.reason, str(err))
            return EXIT_OK
        orchestrator = session.orchestrator(self.host, phases=self.phases)
        orchestrator.reporters.extend(r for r in self.reporters
                                      if not isinstance(r, LocalStatus))
        result = orchestrator.run()
        summary = orchestrator.conditions.get(SUMMARY)
        log.info("bootstrap finished: %s (%s); serving until stopped",
                 "ok" if result.ok else "not complete", summary.message)
        return EXIT_OK

    def _report_summary(self, reason: Reason, message: str) -> None:
        """Say why the bootstrap could not start, where `status` and systemd look."""
        last = read_status(self.host)
        conditions = Conditions(self.host, [], last[0] if last else None)
        conditions.set(SUMMARY, "False", reason, message)
        for reporter in self.reporters:
            reporter.publish(conditions.all(), final=True)

    def _serve(self) -> None:
        """Block until an event arrives: no timers, no polling."""
        stop = self.events.get()
        log.info("stopping on %s", signal.Signals(stop.signum).name)
