"""The node's own record of what it claimed, kept in the journal (its section `ipam`).

Written right after each claim, before anything else can fail, so `machine-agent reset`
can give back every address this node holds even when the network phase never finished.
"""

from __future__ import annotations

from dataclasses import asdict, field
from typing import Any

from agent import recordtype
from agent.ipam.base import Allocation, ClaimRequest
from agent.state import Journal, Section


@recordtype.record(frozen=True)
class Held:
    """One address this node holds: which plugin gave it, and how to give it back."""

    plugin: str
    claim_key: str
    pool: str
    interface: str
    allocation: Allocation

    def as_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["allocation"]["dns_servers"] = list(self.allocation.dns_servers)
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Held:
        alloc = dict(doc["allocation"])
        alloc["dns_servers"] = tuple(alloc.get("dns_servers") or ())
        return cls(doc["plugin"], doc["claim_key"], doc["pool"], doc["interface"],
                   Allocation(**alloc))


@recordtype.record
class Ledger(Section):
    """Every address this node holds, by claim key (as `Held.as_json` in the file)."""

    KEY = "ipam"
    held: dict[str, Held] = field(default_factory=dict)

    def to_json(self) -> Any:
        return {key: h.as_json() for key, h in self.held.items()}

    @classmethod
    def from_json(cls, doc: Any) -> Ledger:
        return cls({key: Held.from_json(entry) for key, entry in doc.items()}
                   if isinstance(doc, dict) else {})


def record(journal: Journal, plugin: str, request: ClaimRequest, alloc: Allocation) -> None:
    """Remember `alloc` under its claim key (saved at once; unchanged entries are not
    rewritten)."""
    entry = Held(plugin, request.claim_key, request.pool, request.interface, alloc)
    ledger = journal.section(Ledger)
    if ledger.held.get(request.claim_key) != entry:
        ledger.held[request.claim_key] = entry
        journal.save()


def held(journal: Journal) -> list[Held]:
    return [h for _, h in sorted(journal.section(Ledger).held.items())]


def forget(journal: Journal, claim_key: str) -> None:
    journal.section(Ledger).held.pop(claim_key, None)
    journal.save()
