"""Conditions, and the interface of where they are published (`Reporter`)."""

from __future__ import annotations

from typing import Literal, Protocol

from agent.errors import Reason
from agent.host import Host
from agent.logs import REDACT
from agent.recordtype import record

SUMMARY = "NodeBootstrapped"
"""The summary condition type; put it in Machine.spec.readinessGates."""
NODE_READY = "WorkloadNodeReady"
"""The Node's Ready condition as the cni phase saw it True on the workload cluster. The
agent's own type: CAPI's controller owns `Ready`, `NodeReady` and `NodeHealthy`."""
MAX_MESSAGE = 10240
"""Kept within v1beta1's limit (characters, and bytes on the Machine: agent.kube.reporter)
so the message fits either API version."""

Status = Literal["True", "False", "Unknown"]


@record(frozen=True)
class Condition:
    type: str
    status: Status
    reason: str
    message: str
    last_transition_time: str


class Reporter(Protocol):
    def publish(self, conditions: list[Condition], final: bool) -> None:
        """Publish the current conditions; `final` when the run's outcome is known."""


class Conditions:
    """The current conditions. `lastTransitionTime` moves only when `status` changes."""

    def __init__(self, host: Host, types: list[str],
                 previous: list[Condition] | None = None) -> None:
        self.host = host
        self._by_type: dict[str, Condition] = {c.type: c for c in previous or []}
        for kind in [*types, SUMMARY]:
            if kind not in self._by_type:
                self.set(kind, "Unknown", Reason.Pending, "not started")

    def set(self, kind: str, status: Status, reason: Reason, message: str) -> Condition:
        old = self._by_type.get(kind)
        stamp = (old.last_transition_time if old is not None and old.status == status
                 else self.host.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"))
        text = REDACT(message)
        if len(text) > MAX_MESSAGE:
            text = text[: MAX_MESSAGE - 15] + " …(truncated)"
        cond = Condition(kind, status, str(reason), text, stamp)
        self._by_type[kind] = cond
        return cond

    def get(self, kind: str) -> Condition:
        return self._by_type[kind]

    def all(self) -> list[Condition]:
        return list(self._by_type.values())
