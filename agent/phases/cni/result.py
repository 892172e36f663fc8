"""What the cni phase proved, journaled for `status`, the condition, the daemon's
clean-up (the list it wrote) and the next run's check that the node still shows it; and
what it keeps in the journal across runs."""

from __future__ import annotations

from dataclasses import field

from agent.phases.base import PhaseResult
from agent.phases.facts import CNIConfigList, Fact
from agent.recordtype import record
from agent.state import Section


@record
class Proof:
    """The ADD/CHECK/DEL run against a throwaway namespace."""

    commands: list[str] = field(default_factory=list)
    address: str | None = None
    """The address the pod got."""
    namespace: str = ""


@record
class ManifestDecision:
    applied: bool = False
    """Whether this node applies the CNI manifest."""
    why: str = ""


@record
class CNIResult(PhaseResult):
    bin_dir: str = ""
    conflist: str | None = None
    """The path of the configuration list written."""
    network: str | None = None
    """The list's network name."""
    plugins: list[str] = field(default_factory=list)
    conflist_digest: str | None = None
    check: Proof | None = None
    manifest: ManifestDecision | None = None
    node: str | None = None
    node_ready: bool = False
    node_ready_reason: str | None = None
    node_ready_message: str | None = None

    def facts(self) -> list[Fact]:
        return [CNIConfigList(self.conflist)] if self.conflist else []


@record
class CNIRecord(Section):
    """What the cni phase keeps across runs: the manifest this node applied (a node that
    applied it once applies it again, `manifest.apply: auto`)."""

    KEY = "cni"
    manifest_applied: str | None = None
    """The sha256 of the manifest applied."""
