"""The local status file `machine-agent status`, `status --wait` and `analyze` read."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict
from typing import Any

from agent import records
from agent.errors import StateError
from agent.host import Host
from agent.report.conditions import Condition
from agent.state import STATE_DIR

STATUS_FILE = f"{STATE_DIR}/status.json"
log = logging.getLogger(__name__)
BOOT_ID = "/proc/sys/kernel/random/boot_id"
"""The kernel's id of this boot: the status file names the boot it was written in, since
it outlives a reboot (`status --wait` must wait for this boot's outcome)."""


class LocalStatus:
    """The status file `machine-agent status`, `status --wait` and `analyze` read: the
    conditions, and the run's timeline (each condition change with its time, to the
    millisecond), from which `analyze` tells where the run's time went."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.boot = boot_id(host)

    def publish(self, conditions: list[Condition], final: bool) -> None:
        now = _stamp(self.host)
        before = _read_doc(self.host)
        # A run begins with the first report after a final one (or after a reboot): the
        # daemon marks the status not final as it starts, before it reads anything.
        if before is None or before.get("final") or before.get("boot") != self.boot or \
                "startedAt" not in before:
            new_run, started, events = True, now, []
            shown: dict[str, tuple[str, str, str]] = {}
        else:
            new_run, started = False, str(before["startedAt"])
            events = list(before.get("events", []))
            shown = {c["type"]: (c["status"], c["reason"], c["message"])
                     for c in before.get("conditions", [])}
        for c in conditions:
            if new_run or shown.get(c.type) != (c.status, c.reason, c.message):
                _add_event(events, {"at": now, "type": c.type, "status": c.status,
                                    "reason": c.reason, "message": c.message})
        doc: dict[str, object] = {
            "final": final, "boot": self.boot,
            "startedAt": started,
            "conditions": [asdict(c) for c in conditions], "events": events}
        if final:
            doc["finishedAt"] = now
        # 0600: its messages can name hosts, paths and pools; `status` is run as root
        self.host.write_file(STATUS_FILE, json.dumps(doc, indent=1) + "\n",
                             mode=0o600, dir_mode=0o700)


MAX_EVENTS = 2000
"""Bound on the timeline's length. Repeated progress of one wait (a poll's offset every
second) replaces its previous event instead of adding one, so a run stays far below."""


def _add_event(events: list[dict[str, str]], event: dict[str, str]) -> None:
    last = next((e for e in reversed(events) if e["type"] == event["type"]), None)
    if last is not None and events and events[-1] is last and \
            (last["status"], last["reason"]) == (event["status"], event["reason"]) and \
            wait_kind(last["message"]) == wait_kind(event["message"]):
        # The same wait going on (a poll's new figures): the span started with `last`.
        last["message"] = event["message"]
        return
    if len(events) >= MAX_EVENTS:
        del events[len(events) // 2]  # the middle: the start and the end tell most
    events.append(event)


def wait_kind(message: str) -> str:
    """What a progress message waits for, without its changing figures: "waiting for
    the clock to synchronise (offset 40ms ...)" polled every second is one wait."""
    return re.sub(r"\d+(?:\.\d+)?", "N", message.split("(", 1)[0]).strip()


def _stamp(host: Host) -> str:
    return host.clock.now().strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _read_doc(host: Host) -> dict[str, Any] | None:
    try:
        text = host.read_text(STATUS_FILE)
        doc = records.loads(text) if text else None
    except (OSError, ValueError):
        return None  # unreadable: a new file is written
    return doc if isinstance(doc, dict) else None


def boot_id(host: Host) -> str | None:
    """This boot's id; None where the kernel does not say (a test root)."""
    text = host.read_text(BOOT_ID)
    return text.strip() or None if text is not None else None


MAX_STATUS = 4 << 20
"""The status file holds the conditions (10 KiB messages) and a timeline: far less."""


def from_previous_boot(host: Host) -> bool:
    """Whether the status file was written in an earlier boot than this one."""
    doc = read_status_document(host)
    if doc is None:
        return False
    written, now = doc.get("boot"), boot_id(host)
    return written is not None and now is not None and written != now


def read_status_document(host: Host) -> dict[str, Any] | None:
    """The status file as written (conditions, timeline); None if there is none;
    StateError saying why when it cannot be read (cut short, not a file, too big)."""
    try:
        text = host.read_text(STATUS_FILE, limit=MAX_STATUS)
    except (OSError, UnicodeDecodeError) as err:
        raise _unreadable(str(err)) from err
    if text is None:
        return None
    try:
        doc = records.loads(text)
    except ValueError as err:
        raise _unreadable(str(err)) from err
    if not isinstance(doc, dict):
        raise _unreadable("not a JSON object")
    return doc


def read_status(host: Host) -> tuple[list[Condition], bool] | None:
    """The last published conditions and whether the run had finished; None if none;
    StateError when the file cannot be read."""
    doc = read_status_document(host)
    if doc is None:
        return None
    try:
        return [Condition(**c) for c in doc["conditions"]], bool(doc["final"])
    except (KeyError, TypeError) as err:
        raise _unreadable(f"no conditions and final: {err}") from err


def last_outcome(host: Host) -> tuple[list[Condition], bool] | None:
    """`read_status` for a run about to write the file anew: an unreadable one counts
    as none (said in the log), since the run replaces it."""
    try:
        return read_status(host)
    except StateError as err:
        log.warning("%s; a new one is written", err)
        return None


def _unreadable(why: str) -> StateError:
    return StateError(f"the status file {STATUS_FILE} is unreadable ({why})",
                      hint="`machine-agent run` (or the daemon) writes it anew")
