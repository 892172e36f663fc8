"""Events (events.k8s.io/v1) about the Machine, one per condition transition.

An Event's name is derived from the transition it tells (Machine UID, condition type,
status, reason and transition time), so sending it twice — after a retry, or after an
agent restart — answers AlreadyExists instead of making a duplicate.
"""

from __future__ import annotations

import hashlib
from typing import Any

from agent.kube.client import resource_path
from agent.kube.machine import GROUP, MachineView

REPORTING_CONTROLLER = "machine-agent.io/machine-agent"
ACTION = "Bootstrap"
MAX_NOTE_BYTES = 1024
"""events.k8s.io/v1 rejects a note longer than 1 kB."""


def events_path(namespace: str) -> str:
    return resource_path("events.k8s.io", "v1", "events", namespace=namespace)


def transition_event(machine: MachineView, condition: dict[str, Any]) -> dict[str, Any]:
    """The Event for a condition that just became True or False."""
    facts = machine.facts
    key = "|".join((facts.uid, condition["type"], condition["status"], condition["reason"],
                    condition["lastTransitionTime"]))
    name = f"{facts.name[:200]}.{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    note = f"{condition['type']} is {condition['status']}: {condition['message']}"
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": facts.namespace},
        "eventTime": condition["lastTransitionTime"].replace("Z", ".000000Z"),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": f"machine-agent-{facts.name}"[:128],
        "action": ACTION,
        "reason": condition["reason"],
        "type": "Normal" if condition["status"] == "True" else "Warning",
        "note": clip(note, MAX_NOTE_BYTES),
        "regarding": {"apiVersion": f"{GROUP}/{machine.version}", "kind": "Machine",
                      "name": facts.name, "namespace": facts.namespace, "uid": facts.uid},
    }


def clip(text: str, limit: int) -> str:
    """At most `limit` UTF-8 bytes, cut on a character boundary."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - 4].decode(errors="ignore") + " …"
