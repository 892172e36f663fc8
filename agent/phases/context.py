"""What a phase is given (`PhaseContext`) and what it proves (`PhaseResult`), apart from
the `Phase` interface (agent/phases/base.py) so that the doctor's types
(agent/phases/checks.py) build a context without importing the interface."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from agent import records
from agent.config import AgentConfig
from agent.errors import Reason
from agent.host import Host
from agent.kube.client import Client
from agent.kube.facts import MachineFacts
from agent.state import Journal


@dataclass
class PhaseResult:
    """Base of what a phase proved (each phase's own dataclass, in its folder): journaled
    as JSON (agent/records.py), read back for later phases, `status` and the condition;
    every field has a default, so a journal an earlier version wrote is read too. The
    facts below are what later phases may use without knowing which phase established
    them (phases never import each other)."""

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = records.to_json(self)
        return doc

    @classmethod
    def from_json(cls: type[R], doc: dict[str, Any]) -> R:
        return records.from_json(cls, doc)

    def node_addresses(self) -> dict[str, list[str]]:
        """Addresses this phase put on the node's links: link → `address/prefix`."""
        return {}

    def node_name(self) -> str | None:
        """The Node this machine registered as, once known."""
        return None

    def joined_control_plane(self) -> bool:
        """Whether this machine joined (or initialized) as a control plane."""
        return False

    def cni_config_list(self) -> str | None:
        """The CNI configuration list this phase wrote (the delete policy removes it)."""
        return None


R = TypeVar("R", bound=PhaseResult)


class Results(dict[str, PhaseResult]):
    """What earlier phases proved, by phase name, and the facts they established."""

    def node_addresses(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for result in self.values():
            for link, addresses in result.node_addresses().items():
                out.setdefault(link, []).extend(addresses)
        return out

    def node_name(self) -> str | None:
        return next((n for r in self.values() if (n := r.node_name())), None)

    def joined_control_plane(self) -> bool:
        return any(r.joined_control_plane() for r in self.values())

    def cni_config_lists(self) -> dict[str, str]:
        """The CNI configuration lists written, by the phase that wrote each."""
        return {name: path for name, r in self.items() if (path := r.cni_config_list())}


class Progress(Protocol):
    def __call__(self, message: str, reason: Reason = Reason.InProgress) -> None:
        """Say what a long wait is waiting for, under `reason` (e.g. TimeSynchronizing)."""


@dataclass
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
