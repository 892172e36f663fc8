"""The names of a node's IPAddressClaims, known before any is made: the capi IPAM plugin
creates them under these names, and the node's RBAC (agent/kube/rbac.py) grants rights on
exactly these names."""

from __future__ import annotations

import hashlib
import re

_NOT_DNS = re.compile(r"[^a-z0-9-]+")
UID = re.compile(r"[-A-Za-z0-9]{1,128}")
"""An object's metadata.uid as an API server gives it (a UUID)."""


def claim_key(machine_uid: str, interface: str, family: str) -> str:
    """What identifies one claimed address: the same after a retry or a reboot, new for a
    new Machine of the same name."""
    return f"{machine_uid}/{interface}/{family}"


def claim_name(machine: str, interface: str, family: str, key: str) -> str:
    """A valid, deterministic object name: `<machine>-<interface>-<v4|v6>-<hash>`."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    iface = _NOT_DNS.sub("-", interface.lower()).strip("-") or "if"
    head = f"{machine[:200].rstrip('.-')}-{iface[:20]}".strip("-")
    return f"{head}-{family[-2:]}-{digest}"
