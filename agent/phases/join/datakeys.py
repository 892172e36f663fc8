"""The keys of the bootstrap data beyond files and commands: each one delegated to the
agent's own phase that owns it, or refused by name with the fix. None is skipped
silently: a node that joins without the users, disks or time sources its KubeadmConfig
asked for is the half-configured node the join phase exists to prevent.

What CABPK writes besides write_files/runcmd (cluster-api bootstrap/kubeadm/pkg/cloudinit:
ntp.go, users.go, disk_setup.go, fs_setup.go, mounts.go, boot_commands.go; its ignition
output: the same from pkg/ignition/clc/clc.go, as passwd.users, systemd units and files):

- `bootcmd`: carried out (the join phase runs it first; cloudconfig.py).
- `ntp`: delegated to the time phase, which owns time synchronisation on an agent node;
  accepted when every server it names is in `spec.time.servers` (or it is disabled or
  empty), refused otherwise: two owners of chrony.conf would undo each other.
- `ntp` in Ignition: CABPK writes `ntpd.service` (enabled) and /etc/ntp.conf with its
  `server` lines; ignition.py reads them back into this same `ntp` key.
- `users` (ignition: `passwd.users`, `.groups`): refused when not empty. Accounts are the image's:
  the agent runs no useradd from data a management cluster hands out.
- `disk_setup`, `fs_setup`, `mounts` (ignition: `storage.disks`, `storage.filesystems`,
  mount units): refused when not empty. The agent never partitions or formats a disk.
- Ignition's fields for fetching remote configs and contents (`ignition.config`,
  `.security`, `.timeouts`, `.proxy`) and for the network (`networkd.units`): refused when
  set. The agent fetches nothing, and the network phase owns the network.
- anything else: refused; it is not what CABPK writes, and the agent cannot know what it
  should do.
"""

from __future__ import annotations

from typing import Any

from agent.config import AgentConfig
from agent.phases.join.cloudconfig import BootstrapDataError
from agent.printable import printable

_USERS_FIX = ("bake the accounts into the image (or create them in preKubeadmCommands), "
              "and remove `users` from the KubeadmConfig")
_DISK_FIX = ("partition, format and mount in the image, or with systemd mount units in "
             "the image; remove diskSetup and mounts from the KubeadmConfig")
_FETCH_FIX = ("it only concerns configs and contents fetched from elsewhere, and the "
              "agent fetches nothing: inline them (as data: URLs) and remove it")
NTP_SHOWN = {"ignition": "ntp (ntpd.service and /etc/ntp.conf)"}
"""How a format spells the KubeadmConfig's ntp."""
REFUSED: dict[str, str] = {
    "users": _USERS_FIX, "passwd.users": _USERS_FIX, "passwd.groups": _USERS_FIX,
    "disk_setup": _DISK_FIX, "fs_setup": _DISK_FIX, "mounts": _DISK_FIX,
    "storage.disks": _DISK_FIX, "storage.filesystems": _DISK_FIX, "storage.raid": _DISK_FIX,
    "storage.luks": _DISK_FIX,
    "storage.directories": "create directories in the image or in preKubeadmCommands",
    "storage.links": "create links in the image or in preKubeadmCommands",
    "ignition.config": _FETCH_FIX, "ignition.security": _FETCH_FIX,
    "ignition.timeouts": _FETCH_FIX, "ignition.proxy": _FETCH_FIX,
    "networkd.units": "the network phase owns the node's network: describe it in "
                      "spec.network, and remove the units",
}


def check_other_keys(other: dict[str, Any], config: AgentConfig, kind: str) -> list[str]:
    """Notes for the plan on what is delegated; raises naming every refused key."""
    notes: list[str] = []
    refused: list[str] = []
    for key, value in sorted(other.items()):
        if key == "ntp":
            problem = _ntp(value, config)
            key = NTP_SHOWN.get(kind, key)
            if problem is None:
                notes.append(f"{kind} {key}: delegated to the time phase (spec.time.servers "
                             "holds every server it names)")
            else:
                refused.append(f"{kind} {key}: {problem}")
        elif key == "systemd.units.kubeadm.service.dropins":
            notes.append(f"{kind} kubeadm.service drop-ins: {' '.join(value)}: the agent "
                         "runs the script once the boot started these units")
        elif key in REFUSED:
            if _empty(value):
                continue
            refused.append(f"{kind} {key}: the agent does not carry this out; "
                           f"{REFUSED[key]}")
        elif key.startswith("systemd.units.") and isinstance(value, dict) \
                and set(value) <= {"name", "enabled", "enable"}:
            refused.append(f"{kind} {key}: the agent does not enable the image's units; "
                           "enable it in the image (`systemctl enable "
                           f"{printable(str(value.get('name')))}` "
                           "when building it), and remove it from the bootstrap data")
        elif key.startswith("systemd.units."):
            refused.append(f"{kind} {key}: the agent does not install units from bootstrap "
                           "data; ship the unit in the image (NTP: spec.time; mounts: a "
                           "mount unit in the image)")
        else:
            refused.append(f"{kind} {key}: not a key CABPK writes; the agent cannot tell "
                           "what it should do; remove it from the bootstrap data")
    if refused:
        raise BootstrapDataError(
            f"the bootstrap data asks for {len(refused)} thing(s) the agent refuses: "
            + "; ".join(refused),
            hint="each is named with its fix; nothing was applied")
    return notes


def _empty(value: Any) -> bool:
    return value is None or value == [] or value == {}


def _ntp(value: Any, config: AgentConfig) -> str | None:
    """None when the time phase covers the ntp key, else what is wrong and the fix."""
    if _empty(value):
        return None
    if not isinstance(value, dict):
        return "is not a mapping"
    if value.get("enabled") is False:
        return None
    servers = [str(s) for s in (value.get("servers") or []) + (value.get("pools") or [])]
    if not servers:
        return None
    if "time" in config.spec.skip_phases:
        return ("the time phase is skipped (spec.skipPhases), so nothing would set up "
                f"{', '.join(servers)}; run the time phase, or remove ntp from the "
                "KubeadmConfig")
    known = {s.host for s in config.spec.time.servers}
    missing = [s for s in servers if s not in known]
    if missing:
        return (f"servers {', '.join(missing)} are not in spec.time.servers; the time "
                "phase owns time sync on this node: add them there, or remove ntp from the "
                "KubeadmConfig")
    return None
