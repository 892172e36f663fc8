"""CABPK's success sentinel, written once the run has bootstrapped the node."""

from __future__ import annotations

from agent.host import Host
from agent.report.conditions import SUMMARY, Condition

SENTINEL = "/run/cluster-api/bootstrap-success.complete"
"""The bootstrap provider contract's sentinel file (cluster-api docs/book/src/developer/
providers/contracts/bootstrap-config.md, "Sentinel file"; CABPK's cloud-init runs
`echo success > ...` after a successful join). Written here, by `Sentinel`, and nowhere
else in the agent."""


class Sentinel:
    """Writes CABPK's success sentinel once the run has finished with NodeBootstrapped
    True, so tooling that waits for it keeps working."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def publish(self, conditions: list[Condition], final: bool) -> None:
        done = any(c.type == SUMMARY and c.status == "True" for c in conditions)
        if final and done and not self.host.exists(SENTINEL):
            self.host.write_file(SENTINEL, "success\n", mode=0o644)
