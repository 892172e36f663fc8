"""Which changes of a rollout the agent makes in place, as the JSON patches the Runtime
SDK asks for (pure).

Cluster API applies the patches to the current objects and compares them with the
desired ones: what the patches leave different is rolled out by replacement. So each hook
patches exactly the fields the agent carries out on a running node and leaves the rest:
a KubeadmConfig's `ntp` (the agent's time phase owns time sync), kubelet flags added or
changed in joinConfiguration.nodeRegistration.kubeletExtraArgs and `files` added or
changed with their content inline (the join phase keeps both on a joined node), all
reaching the node through its AgentConfig object (update.py), a worker's Kubernetes
version moved to a newer patch release (the node runs `kubeadm upgrade node` and the
release's kubelet), and a MachineSet's switch to another bootstrap config template (the
template itself is judged field by field). Another minor version or a control plane's
version, infrastructure, a removed file or one from a Secret, users,
taints, a removed kubelet flag or one the kubelet reads only when it registers
(node-labels) stay different: those Machines are replaced.
"""

from __future__ import annotations

from typing import Any

from agent.config import checks
from agent.inplace.hooks import GROUP_VERSION, Obj, json_patch
from agent.phases.join.kubeletflags import AT_REGISTRATION
from agent.phases.join.release import newer_patch

CONTROL_PLANE_LABEL = "cluster.x-k8s.io/control-plane"
IN_PLACE_FIELDS = ("ntp",)
"""KubeadmConfigSpec fields the agent applies on a running node, whole."""
KUBELET_ARGS = ("joinConfiguration", "nodeRegistration", "kubeletExtraArgs")
"""Where a KubeadmConfigSpec (v1beta2) lists the kubelet's extra flags: [{name, value}]."""


def _at(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def ntp_servers(ntp: Any) -> list[str]:
    """The servers and pools an ntp section asks for (none when it is disabled)."""
    if not isinstance(ntp, dict) or ntp.get("enabled") is False:
        return []
    return [str(s) for s in (ntp.get("servers") or []) + (ntp.get("pools") or [])]


def kubelet_args(spec: Any) -> dict[str, str] | None:
    """The kubelet's extra flags a KubeadmConfigSpec gives, by name; None when they are
    not what the agent can keep in place (a flag given twice, a value the kubelet's flag
    line cannot hold)."""
    given = _at(spec, *KUBELET_ARGS) or []
    if not isinstance(given, list):
        return None
    args = {str(a.get("name")): str(a.get("value", "")) for a in given if isinstance(a, dict)}
    if len(args) != len(given) or checks.kubelet_args(args) is not None:
        return None
    return args


def kept_files(spec: Any) -> list[Obj] | None:
    """A KubeadmConfigSpec's files as the agent keeps them in place ({path, content,
    permissions, owner}); None when one is not for the node's AgentConfig (its content
    from a Secret, encoded, appended to, or a value the agent's checks refuse)."""
    given = spec.get("files") or [] if isinstance(spec, dict) else None
    if not isinstance(given, list):
        return None
    files = []
    for entry in given:
        if not isinstance(entry, dict) or set(entry) - {"path", "content", "permissions",
                                                        "owner"}:
            return None  # contentFrom, encoding, append, deferred: a rollout
        kept = {"path": entry.get("path"), "content": entry.get("content", ""),
                "permissions": entry.get("permissions", "0644"),
                "owner": entry.get("owner", "root:root")}
        if not all(isinstance(v, str) for v in kept.values()) or \
                checks.absolute_path(kept["path"]) or checks.octal_mode(kept["permissions"]) \
                or checks.file_owner(kept["owner"]):
            return None
        files.append(kept)
    if len({f["path"] for f in files}) != len(files):
        return None  # a path listed twice: the node's configuration would refuse it
    return files


def _files_ops(current: Any, desired: Any, prefix: str) -> list[Obj]:
    """Files added or changed, in place (the agent writes them and keeps what they
    replaced); a file removed is a rollout."""
    old, new = kept_files(current), kept_files(desired)
    if old is None or new is None or old == new or \
            not {f["path"] for f in old} <= {f["path"] for f in new}:
        return []
    return [{"op": "add", "path": f"{prefix}/files", "value": desired["files"]}]


def _kubelet_ops(current: Any, desired: Any, prefix: str) -> list[Obj]:
    """Added or changed kubelet flags, in place (the agent rewrites kubeadm-flags.env and
    restarts the kubelet); a flag removed is a rollout: the node cannot tell a flag the
    template gave at its join from one kubeadm wrote itself."""
    old, new = kubelet_args(current), kubelet_args(desired)
    if old is None or new is None or old == new or not set(old) <= set(new) or \
            any(old.get(f) != new.get(f) for f in AT_REGISTRATION) or \
            not isinstance(_at(current, *KUBELET_ARGS[:2]), dict):
        return []
    return [{"op": "add", "path": f"{prefix}/{'/'.join(KUBELET_ARGS)}",
             "value": _at(desired, *KUBELET_ARGS)}]


def config_ops(current: Any, desired: Any, prefix: str) -> list[Obj]:
    """JSON patch operations making `current`'s in-place fields (a KubeadmConfigSpec at
    `prefix`) those of `desired`."""
    if not isinstance(current, dict) or not isinstance(desired, dict):
        return []
    ops: list[Obj] = _kubelet_ops(current, desired, prefix) + \
        _files_ops(current, desired, prefix)
    for field in IN_PLACE_FIELDS:
        if current.get(field) == desired.get(field):
            continue
        if field == "ntp" and desired.get(field) is not None and \
                not ntp_servers(desired.get(field)) and ntp_servers(current.get(field)):
            continue  # turning NTP off on a running node: not something to do in place
        if field in desired:
            ops.append({"op": "add", "path": f"{prefix}/{field}", "value": desired[field]})
        else:
            ops.append({"op": "remove", "path": f"{prefix}/{field}"})
    return ops


def _version_ops(current: Any, desired: Any, path: str) -> list[Obj]:
    """A newer patch release: in place (agent.phases.join.release)."""
    return [{"op": "replace", "path": path, "value": desired}] \
        if isinstance(current, str) and isinstance(desired, str) and \
        newer_patch(current, desired) else []


def can_update_machine_set(request: Obj) -> Obj:
    current, desired = request.get("current") or {}, request.get("desired") or {}
    response: Obj = {"apiVersion": GROUP_VERSION, "kind": "CanUpdateMachineSetResponse",
                     "status": "Success"}
    template_ops = config_ops(_at(current, "bootstrapConfigTemplate", "spec", "template", "spec"),
                              _at(desired, "bootstrapConfigTemplate", "spec", "template",
                                  "spec"), "/spec/template/spec")
    if template_ops:
        response["bootstrapConfigTemplatePatch"] = json_patch(template_ops)
    spec = ("machineSet", "spec", "template", "spec")
    machine_set_ops = _version_ops(_at(current, *spec, "version"), _at(desired, *spec, "version"),
                                   "/spec/template/spec/version")
    old_ref, new_ref = _at(current, *spec, "bootstrap", "configRef"), \
        _at(desired, *spec, "bootstrap", "configRef")
    if isinstance(old_ref, dict) and isinstance(new_ref, dict) and old_ref != new_ref and \
            {k: v for k, v in old_ref.items() if k != "name"} == \
            {k: v for k, v in new_ref.items() if k != "name"}:
        machine_set_ops.append({
            "op": "replace", "path": "/spec/template/spec/bootstrap/configRef/name",
            "value": new_ref.get("name")})
    if machine_set_ops:
        response["machineSetPatch"] = json_patch(machine_set_ops)
    return response


def can_update_machine(request: Obj) -> Obj:
    current, desired = request.get("current") or {}, request.get("desired") or {}
    response: Obj = {"apiVersion": GROUP_VERSION, "kind": "CanUpdateMachineResponse",
                     "status": "Success"}
    ops = config_ops(_at(current, "bootstrapConfig", "spec"),
                     _at(desired, "bootstrapConfig", "spec"), "/spec")
    if ops:
        response["bootstrapConfigPatch"] = json_patch(ops)
    labels = _at(current, "machine", "metadata", "labels") or {}
    if CONTROL_PLANE_LABEL not in labels:  # a control plane's upgrade is kubeadm's own
        machine_ops = _version_ops(_at(current, "machine", "spec", "version"),
                                   _at(desired, "machine", "spec", "version"), "/spec/version")
        if machine_ops:
            response["machinePatch"] = json_patch(machine_ops)
    return response
