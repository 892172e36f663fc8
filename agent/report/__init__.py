"""Conditions and where they are published: the local status file (`local.py`), CABPK's
sentinel (`sentinel.py`), and, through `Reporter`s added by the layers above, the
Machine's status and Events (agent.kube.reporter) and sd_notify (agent.systemd). Needs
nothing of the management cluster: below agent.kube."""

from agent.report.conditions import (
    MAX_MESSAGE,
    NODE_READY,
    SUMMARY,
    Condition,
    Conditions,
    Reporter,
    Status,
)
from agent.report.local import (
    BOOT_ID,
    STATUS_FILE,
    LocalStatus,
    boot_id,
    from_previous_boot,
    last_outcome,
    read_status,
    read_status_document,
    wait_kind,
)
from agent.report.sentinel import SENTINEL, Sentinel

__all__ = ["BOOT_ID", "MAX_MESSAGE", "NODE_READY", "SENTINEL", "STATUS_FILE", "SUMMARY",
           "Condition", "Conditions", "LocalStatus", "Reporter", "Sentinel", "Status",
           "boot_id", "from_previous_boot", "last_outcome", "read_status", "read_status_document",
           "wait_kind"]
