"""The kubelet's flags as kubeadm writes them into /var/lib/kubelet/kubeadm-flags.env
(kubernetes/kubernetes cmd/kubeadm/app/phases/kubelet/flags.go buildKubeletArgs and
WriteKubeletDynamicEnvFile), and what the kubelet makes of them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from machine_agent_sandbox.kubeadm.hostname import node_name

FLAGS = "var/lib/kubelet/kubeadm-flags.env"


def extra_args(registration: dict[str, Any]) -> dict[str, str]:
    """nodeRegistration.kubeletExtraArgs: a map (v1beta3) or a list of {name, value}
    (v1beta4)."""
    given = registration.get("kubeletExtraArgs") or {}
    if isinstance(given, list):
        return {str(a.get("name")): str(a.get("value", "")) for a in given
                if isinstance(a, dict)}
    return {str(k): str(v) for k, v in given.items()}


def kubelet_flags(root: Path, name: str, extra: dict[str, str]) -> str:
    """kubeadm-flags.env: `--hostname-override` only when the node's name is not its host
    name (the kubelet then takes the host name itself), then kubeletExtraArgs, which
    override kubeadm's own, sorted by name (ArgumentsToCommand)."""
    args: dict[str, str] = {}
    if name != node_name(root):
        args["hostname-override"] = name
    args.update(extra)
    line = " ".join(f"--{k}={v}" for k, v in sorted(args.items()))
    return f'KUBELET_KUBEADM_ARGS="{line}"\n'


def kubelet_flag(root: Path, flag: str) -> str | None:
    """A flag's value in kubeadm-flags.env; None when it is not there (or no file)."""
    try:
        text = (root / FLAGS).read_text()
    except OSError:
        return None
    found = re.search(rf'--{re.escape(flag)}=([^\s"]*)', text)
    return found.group(1) if found else None


def kubelet_node_name(root: Path) -> str | None:
    """The name the node's kubelet registers with: its --hostname-override, else the host
    name (pkg/kubelet: nodeutil.GetHostname); None before kubeadm wrote its flags."""
    if not (root / FLAGS).exists():
        return None
    return kubelet_flag(root, "hostname-override") or node_name(root)
