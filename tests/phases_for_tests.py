"""A phase with real side effects for testing the orchestrator and journal: it writes a
file, appends a line (not idempotent by nature: only the journal keeps it from repeating)
and writes a second file. Also runnable as a script, for the crash test's child process."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from agent.config import AgentConfig
from agent.errors import Reason, TemporaryError
from agent.host import Host
from agent.phases.base import Change, PhaseContext, PhaseOf, PhasePlan, PhaseResult, file_change
from agent.state import digest

LOG = "/var/log/steps.log"


@dataclass
class FilesResult(PhaseResult):
    files: int = 0


class FilesPhase(PhaseOf[FilesResult]):
    name = "network"  # stands in for a real phase, so the config section exists
    condition = "NetworkReady"
    success = Reason.NetworkConfigured
    Result = FilesResult

    def __init__(self, fail_times: int = 0) -> None:
        self.fail_times = fail_times

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        plan = PhasePlan(self.name)
        first = file_change(ctx.host, "/etc/demo/first.conf", "first = 1\n")
        if first:
            plan.changes.append(first)

        def append(h: Host) -> None:
            h.write_file(LOG, (h.read_text(LOG) or "") + "appended once\n")

        def fingerprint(h: Host) -> str:
            return digest(h.read_text(LOG))

        plan.changes.append(Change("append:steps", f"append a line to {LOG}", append,
                                   probe=fingerprint))
        second = file_change(ctx.host, "/etc/demo/second.conf", "second = 2\n", mode=0o600)
        if second:
            plan.changes.append(second)
        return plan

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> FilesResult:
        if self.fail_times > 0:
            self.fail_times -= 1
            raise TemporaryError("the world is not ready yet", reason=Reason.IPAMUnavailable)
        return FilesResult(files=2)

    def inputs(self, config: AgentConfig) -> Any:
        return "files-v1"


if __name__ == "__main__":
    from agent.commands import node_host
    from agent.config import load_config
    from agent.orchestrator import Orchestrator
    from agent.report import LocalStatus

    host = node_host(sys.argv[1])
    loaded = load_config(host, [])
    result = Orchestrator(loaded, host, phases=[FilesPhase()],
                          reporters=[LocalStatus(host)]).run()
    sys.exit(result.exit_code)
