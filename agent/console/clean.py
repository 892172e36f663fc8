"""`machine-agent clean`: seal an image, as `cloud-init clean` does, so that every machine
made from it bootstraps as a new node: the agent's state (the journal of runs, the status
file, stored credentials, check scratch data) and the success sentinel go; with
`--logs`, the journal's files; with `--machine-id`, /etc/machine-id is emptied so systemd
gives each clone its own id (and DHCP and journald tell them apart).

What it leaves: the agent's configuration (/etc/machine-agent) and files the phases
wrote (networkd, chrony, kubelet, CNI), which belong to the image's owner. Addresses the
node still holds from an IPAM backend would be leaked by forgetting them, so clean
refuses while the journal records any (`machine-agent release-addresses` first), unless
`--force`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.errors import PermanentError
from agent.host import Host
from agent.ipam.ledger import held
from agent.report import SENTINEL
from agent.state import STATE_DIR, Journal

MACHINE_ID = "/etc/machine-id"
JOURNAL_DIRS = ("/var/log/journal",)


@dataclass
class CleanReport:
    removed: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        if not self.removed:
            return ["nothing to clean: no agent state on this node"]
        return [f"removed {what}" for what in self.removed]


def clean(host: Host, *, logs: bool = False, machine_id: bool = False,
          force: bool = False) -> CleanReport:
    """Remove what makes this machine a particular node (module docstring). Safe to run
    again: what is gone is not reported twice."""
    if host.exists(STATE_DIR) and not force:
        addresses = held(Journal.load(host))
        if addresses:
            shown = ", ".join(f"{h.allocation.address} ({h.plugin})" for h in addresses)
            raise PermanentError(
                f"the journal records IPAM addresses this node still holds: {shown}",
                hint="give them back with `machine-agent release-addresses` first, or "
                     "clean with --force to leave them claimed")
    report = CleanReport()
    if host.remove_tree(STATE_DIR):
        report.removed.append(f"{STATE_DIR} (journal, status, credentials)")
    if host.remove(SENTINEL):
        report.removed.append(SENTINEL)
    if logs:
        report.removed += _clean_journal(host)
    if machine_id and (host.read_text(MACHINE_ID) or "").strip():
        # Empty, not absent: systemd then generates an id at first boot and, with a
        # read-only /etc, still boots (machine-id(5), "First Boot Semantics").
        host.write_file(MACHINE_ID, "", mode=0o444)
        report.removed.append(f"the machine id in {MACHINE_ID} (emptied)")
    return report


def _clean_journal(host: Host) -> list[str]:
    """The journal's files. On a running system journald first rotates and drops them
    itself (it holds the active files open); in an image tree they are removed."""
    if str(host.root) == "/":
        host.run(["journalctl", "--rotate"], timeout=60)
        host.run(["journalctl", "--vacuum-time=1s"], timeout=60)
        return ["the journal's archived files (journalctl --rotate, --vacuum-time=1s)"]
    removed = []
    for directory in JOURNAL_DIRS:
        for name in host.list_dir(directory):
            path = f"{directory}/{name}"
            if host.path(path).is_dir():
                host.remove_tree(path)
            else:
                host.remove(path)
            removed.append(path)
    return removed
