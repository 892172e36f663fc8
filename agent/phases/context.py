"""What a phase is given (`PhaseContext`) and what it proves (`PhaseResult`), apart from
the `Phase` interface (agent/phases/base.py) so that the doctor's types
(agent/phases/checks.py) build a context without importing the interface."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from agent import records
from agent.config import AgentConfig
from agent.errors import Reason
from agent.host import Host
from agent.kube.client import Client
from agent.kube.facts import MachineFacts
from agent.phases.facts import CNIConfigList, ControlPlaneMember, Fact, NodeAddresses, NodeName
from agent.recordtype import record
from agent.state import Journal


@record
class PhaseResult:
    """Base of what a phase proved (each phase's own dataclass, in its folder): journaled
    as JSON (agent/records.py), read back for later phases, `status` and the condition;
    every field has a default, so a journal an earlier version wrote is read too. What
    later phases may use of it without knowing the phase is its `facts()`."""

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = records.to_json(self)
        return doc

    @classmethod
    def from_json(cls: type[R], doc: dict[str, Any]) -> R:
        return records.from_json(cls, doc)

    def facts(self) -> list[Fact]:
        """The facts this result establishes (of the kinds its phase `provides`)."""
        return []


R = TypeVar("R", bound=PhaseResult)
F = TypeVar("F", bound=Fact)


class Results(dict[str, PhaseResult]):
    """What earlier phases proved, by phase name, and the facts they established."""

    def facts(self, kind: type[F]) -> list[F]:
        """Every fact of `kind`, in the order the phases ran."""
        return [f for r in self.values() for f in r.facts() if isinstance(f, kind)]

    def node_addresses(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for fact in self.facts(NodeAddresses):
            for link, addresses in fact.by_link.items():
                out.setdefault(link, []).extend(addresses)
        return out

    def node_name(self) -> str | None:
        return next((f.name for f in self.facts(NodeName) if f.name), None)

    def joined_control_plane(self) -> bool:
        return bool(self.facts(ControlPlaneMember))

    def cni_config_lists(self) -> dict[str, str]:
        """The CNI configuration lists written, by the phase that wrote each."""
        return {name: f.path for name, r in self.items() for f in r.facts()
                if isinstance(f, CNIConfigList) and f.path}


class Progress(Protocol):
    def __call__(self, message: str, reason: Reason = Reason.InProgress) -> None:
        """Say what a long wait is waiting for, under `reason` (e.g. TimeSynchronizing)."""


@record
class PhaseContext:
    config: AgentConfig
    host: Host
    journal: Journal
    results: Results
    """What earlier phases proved, by phase name."""
    progress: Progress
    """Say what a long wait is waiting for; reaches the log and the phase's condition."""
    log: logging.Logger
    machine: MachineFacts | None = None
    """The Machine as read from the management cluster; None when run without one."""
    reload_machine: Callable[[], MachineFacts] | None = None
    """Read the Machine (and its bootstrap data) again, e.g. for a fresh bootstrap token
    after the first one expired; None when there is no management cluster to ask."""
    management: Client | None = None
    """The management-cluster client (e.g. for IPAM claims); None without one."""
    show_secrets: bool = False
    """`plan --show-secrets`, asked for at the node: show the bootstrap data's file
    contents and command lines. Otherwise they are secret (credentials ride in them):
    paths, sizes and digests only."""


class ResultReader(Protocol):
    """What reads a phase's journaled result back (a `Phase`)."""

    @property
    def name(self) -> str: ...

    def result_from(self, doc: dict[str, Any]) -> PhaseResult: ...
