"""`machine-agent daemon` with test phases, run as a child process by the daemon tests:
the files phase (real side effects) and a phase that waits `SLOW_SECONDS` in verify."""

from __future__ import annotations

import os
import sys

from agent.errors import Reason
from agent.phases.base import Phase, PhaseContext, PhasePlan, PhaseResult
from tests.phases_for_tests import FilesPhase


class SlowPhase(Phase):
    name = "time"  # stands in for a real phase, so the config section exists
    condition = "TimeSynchronized"
    success = Reason.TimeSynchronized

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> PhaseResult:
        ctx.progress("waiting for the slow thing")
        ctx.host.clock.sleep(float(os.environ.get("SLOW_SECONDS", "0")))
        return PhaseResult()


if __name__ == "__main__":
    from agent.commands import node_host
    from agent.daemon import Daemon
    from agent.logs import setup_logging
    from agent.systemd import take_manager_env

    setup_logging()
    notifier, watchdog = take_manager_env(os.environ)
    daemon = Daemon(node_host(sys.argv[1]), notifier=notifier, watchdog=watchdog,
                    phases=[FilesPhase(), SlowPhase()])
    sys.exit(daemon.run())
