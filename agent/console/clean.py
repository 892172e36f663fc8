"""`machine-agent clean`: seal an image, as `cloud-init clean` does, so that every machine
made from it bootstraps as a new node: the agent's state (the journal of runs, the status
file, stored credentials, check scratch data) and the success sentinel go; with
`--logs`, the agent's own logs (it keeps none outside the system journal, which is
every service's and stays); with `--machine-id`, /etc/machine-id is emptied so systemd
gives each clone its own id (and DHCP and journald tell them apart).

What it leaves: the agent's configuration (/etc/machine-agent) and files the phases
wrote (networkd, chrony, kubelet, CNI), which belong to the image's owner. Addresses the
node still holds from an IPAM backend would be leaked by forgetting them, so clean
refuses while the journal records any (`machine-agent release-addresses` first), unless
`--force`.
"""

from __future__ import annotations

from dataclasses import field

from agent.errors import PermanentError
from agent.host import Host
from agent.ipam.ledger import held
from agent.recordtype import record
from agent.report import SENTINEL
from agent.state import NODE_LOCK, STATE_DIR, Journal

MACHINE_ID = "/etc/machine-id"
LOGS_KEPT = ("the system journal (the agent's log lines are entries in it beside every "
             "other service's, and journald removes no single service's entries; "
             "`journalctl --rotate --vacuum-time=1s` empties the whole journal)")
"""What `--logs` leaves: the agent keeps no log of its own outside the system journal
(cloud-init's `clean --logs` removes its own files only, never the journal)."""


@record
class CleanReport:
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    """What a user may expect gone and why it stays."""

    def lines(self) -> list[str]:
        kept = [f"kept {what}" for what in self.kept]
        if not self.removed:
            return ["nothing to clean: no agent state on this node", *kept]
        return [f"removed {what}" for what in self.removed] + kept


def clean(host: Host, *, logs: bool = False, machine_id: bool = False,
          force: bool = False) -> CleanReport:
    """Remove what makes this machine a particular node (module docstring); the caller
    holds the node lock (agent.state.node_lock), so no run or daemon works meanwhile.
    Safe to run again: what is gone is not reported twice."""
    if host.exists(STATE_DIR) and not force:
        addresses = held(Journal.load(host))
        if addresses:
            shown = ", ".join(f"{h.allocation.address} ({h.plugin})" for h in addresses)
            raise PermanentError(
                f"the journal records IPAM addresses this node still holds: {shown}",
                hint="give them back with `machine-agent release-addresses` first, or "
                     "clean with --force to leave them claimed")
    report = CleanReport()
    if _remove_state(host):
        report.removed.append(f"{STATE_DIR} (journal, status, credentials)")
    if host.remove(SENTINEL):
        report.removed.append(SENTINEL)
    if logs:
        report.kept.append(LOGS_KEPT)
    if machine_id and (host.read_text(MACHINE_ID) or "").strip():
        # Empty, not absent: systemd then generates an id at first boot and, with a
        # read-only /etc, still boots (machine-id(5), "First Boot Semantics").
        host.write_file(MACHINE_ID, "", mode=0o444)
        report.removed.append(f"the machine id in {MACHINE_ID} (emptied)")
    return report


def _remove_state(host: Host) -> bool:
    """Everything in the state directory but the node lock, which the caller holds:
    removing a held lock's file would let the next command lock a new file while a
    waiter still takes the old one, two holders at once."""
    removed = False
    for name in host.list_dir(STATE_DIR):
        path = f"{STATE_DIR}/{name}"
        if path != NODE_LOCK:
            removed = host.remove_tree(path) or removed
    return removed
