"""kubeadm's join preflight checks on the static Pod manifests directory, by version
(kubernetes/kubernetes cmd/kubeadm/app/preflight/checks.go).

Up to 1.22 RunJoinNodeChecks began with DirAvailableCheck on /etc/kubernetes/manifests:
any file there (a kube-vip manifest the bootstrap data writes) failed a join with
`[ERROR DirAvailable--etc-kubernetes-manifests]: /etc/kubernetes/manifests is not
empty`. kubernetes/kubernetes#104942 (1.23) dropped it from the join checks
(JoinNodeChecks); a control-plane join still refuses the four static Pod manifests of a
control plane through RunInitNodeChecks (FileAvailable--etc-kubernetes-manifests-*)."""

from __future__ import annotations

from pathlib import Path

from machine_agent_sandbox.kubeadm.errors import minor_version

MANIFESTS_DIR = "etc/kubernetes/manifests"
LAST_DIR_CHECK = (1, 22)


def manifests_dir_check(root: Path, version: str) -> list[tuple[str, str]]:
    """DirAvailableCheck's error for a non-empty manifests directory, on the kubeadm
    versions that run it on join: (check name, message)."""
    if minor_version(version) > LAST_DIR_CHECK:
        return []
    directory = root / MANIFESTS_DIR
    if directory.is_dir() and any(directory.iterdir()):
        return [("DirAvailable--etc-kubernetes-manifests",
                 f"/{MANIFESTS_DIR} is not empty")]
    return []
