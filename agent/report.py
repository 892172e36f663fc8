"""Conditions and where they are published: the local status file, and (through
`Reporter`s added by other modules) the Machine's status, Events, sd_notify."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Literal, Protocol

from agent.errors import Reason
from agent.host import Host
from agent.logs import REDACT
from agent.state import STATE_DIR

SUMMARY = "NodeBootstrapped"
"""The summary condition type; put it in Machine.spec.readinessGates."""
NODE_READY = "WorkloadNodeReady"
"""The Node's Ready condition as the cni phase saw it True on the workload cluster. The
agent's own type: CAPI's controller owns `Ready`, `NodeReady` and `NodeHealthy`."""
STATUS_FILE = f"{STATE_DIR}/status.json"
SENTINEL = "/run/cluster-api/bootstrap-success.complete"
"""The bootstrap provider contract's sentinel file (cluster-api docs/book/src/developer/
providers/contracts/bootstrap-config.md, "Sentinel file"; CABPK's cloud-init runs
`echo success > ...` after a successful join). Written here, by `Sentinel`, and nowhere
else in the agent."""
BOOT_ID = "/proc/sys/kernel/random/boot_id"
"""The kernel's id of this boot: the status file names the boot it was written in, since
it outlives a reboot (`status --wait` must wait for this boot's outcome)."""
MAX_MESSAGE = 10240
"""Kept within v1beta1's limit so the message fits either API version."""

Status = Literal["True", "False", "Unknown"]


@dataclass(frozen=True)
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


class LocalStatus:
    """The status file `machine-agent status` and `status --wait` read."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.boot = boot_id(host)

    def publish(self, conditions: list[Condition], final: bool) -> None:
        doc = {"final": final, "boot": self.boot,
               "conditions": [asdict(c) for c in conditions]}
        # 0600: its messages can name hosts, paths and pools; `status` is run as root
        self.host.write_file(STATUS_FILE, json.dumps(doc, indent=1) + "\n",
                             mode=0o600, dir_mode=0o700)


class Sentinel:
    """Writes CABPK's success sentinel once the run has finished with NodeBootstrapped
    True, so tooling that waits for it keeps working."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def publish(self, conditions: list[Condition], final: bool) -> None:
        done = any(c.type == SUMMARY and c.status == "True" for c in conditions)
        if final and done and not self.host.exists(SENTINEL):
            self.host.write_file(SENTINEL, "success\n", mode=0o644)


def boot_id(host: Host) -> str | None:
    """This boot's id; None where the kernel does not say (a test root)."""
    text = host.read_text(BOOT_ID)
    return text.strip() or None if text is not None else None


def from_previous_boot(host: Host) -> bool:
    """Whether the status file was written in an earlier boot than this one."""
    text = host.read_text(STATUS_FILE)
    if text is None:
        return False
    written, now = json.loads(text).get("boot"), boot_id(host)
    return written is not None and now is not None and written != now


def read_status(host: Host) -> tuple[list[Condition], bool] | None:
    """The last published conditions and whether the run had finished; None if none."""
    text = host.read_text(STATUS_FILE)
    if text is None:
        return None
    doc = json.loads(text)
    return [Condition(**c) for c in doc["conditions"]], bool(doc["final"])
