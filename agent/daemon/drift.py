"""Drift: what the agent configured, changed by hand after it completed. The kernel
announces every change of a link, an address or a route (agent.netlink.changes); the
daemon then asks each completed phase whether its result still holds (the check a run
makes before it calls a phase up to date) and, as `spec.network.drift` says, applies
the phases that no longer hold again (`repair`) or reports them (`report`), on the
condition ConfigurationDrift, whose transitions go out as Events. No polling: nothing
runs while nothing changes, and announcements that arrive while a check is pending
are one check."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from agent.config import AgentConfig
from agent.errors import Reason
from agent.host import Host
from agent.netlink.changes import ChangeWatch
from agent.orchestrator import Orchestrator
from agent.recordtype import record

log = logging.getLogger("agent.daemon")

CONDITION = "ConfigurationDrift"


@record(frozen=True)
class Drift:
    """The kernel announced a change of the node's links, addresses or routes."""


class DriftWatch:
    def __init__(self, host: Host, put: Callable[[Drift], None]) -> None:
        self.host, self.put = host, put
        self._watch: ChangeWatch | None = None
        self._pending = threading.Event()

    def start(self, config: AgentConfig) -> None:
        """Listen while the configuration has interfaces and the node's kernel is the
        host's (its root, or a named namespace); otherwise there is nothing to hear."""
        self.stop()
        if not config.spec.network.interfaces or not (
                self.host.netns is not None or self.host.root == Path("/")):
            return
        self._watch = ChangeWatch(self.host, self._changed).start()

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()
            self._watch = None

    def _changed(self) -> None:
        if not self._pending.is_set():
            self._pending.set()
            self.put(Drift())

    def handle(self, orchestrator: Orchestrator, config: AgentConfig) -> None:
        # cleared first: a change from here on is heard again
        self._pending.clear()
        drifted = orchestrator.drifted()
        if not drifted:
            return
        what = ", ".join(drifted)
        if config.spec.network.drift == "report":
            log.warning("changed by hand since it was applied: %s (left as it is: "
                        "spec.network.drift is report)", what)
            orchestrator.report(CONDITION, "False", Reason.Drifted,
                                f"{what}: changed by hand since it was applied; left as it "
                                "is (spec.network.drift: report)")
            return
        log.warning("changed by hand since it was applied: %s; applying it again", what)
        result = orchestrator.run(only=drifted)
        if result.ok:
            orchestrator.report(CONDITION, "True", Reason.DriftRepaired,
                                f"{what}: changed by hand; applied again")
        else:
            failed = next(o for o in result.outcomes if o.outcome == "failed")
            orchestrator.report(CONDITION, "False", Reason(failed.reason),
                                f"{what}: changed by hand; applying it again failed: "
                                f"{failed.message}")
