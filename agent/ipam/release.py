"""`machine-agent release-addresses` (also `reset`): give back every IPAM address this node claimed.

The addresses come from the journal's IPAM ledger (written at each claim, so a network
phase that failed half-way is covered too). Each is released through the plugin that
claimed it, with the plugin's current settings; an address released is forgotten at
once, so running reset again after a failure retries only what is left. Once nothing is
held, the network phase's record is dropped: the next `run` claims afresh instead of
trusting addresses that were given back.

capi claims also go without a reset: they are owned by the Machine, so deleting the
Machine deletes them (Kubernetes garbage collection) and the provider frees the addresses.
"""

from __future__ import annotations

from typing import Any

from agent.errors import AgentError
from agent.ipam.base import IPAMPlugin, PluginEnv, open_plugin
from agent.ipam.ledger import Held, forget, held
from agent.recordtype import record
from agent.state import Journal

NETWORK_PHASE = "network"


@record(frozen=True)
class Outcome:
    held: Held
    error: AgentError | None = None

    def __str__(self) -> str:
        a = self.held.allocation
        what = (f"{a.address}/{a.prefix} of {self.held.interface} ({self.held.plugin} pool "
                f"{self.held.pool!r})")
        return f"released {what}" if self.error is None else f"NOT released {what}: " \
            f"{self.error}"


def release_all(journal: Journal, settings: dict[str, dict[str, Any]],
                env: PluginEnv) -> list[Outcome]:
    """Release every address in the ledger; one outcome per address, failures included."""
    plugins: dict[str, IPAMPlugin] = {}
    outcomes = []
    for entry in held(journal):
        try:
            if entry.plugin not in plugins:
                plugins[entry.plugin] = open_plugin(entry.plugin, settings, env)
            plugins[entry.plugin].release(entry.allocation)
        except AgentError as err:
            outcomes.append(Outcome(entry, err))
            continue
        forget(journal, entry.claim_key)
        outcomes.append(Outcome(entry))
    if not held(journal) and journal.phases.pop(NETWORK_PHASE, None) is not None:
        journal.save()
    return outcomes
