"""kubeadm's preflight phase: the files it must not find, a control plane's conditions, and
the failures the world injects."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from machine_agent_sandbox.kubeadm.node import MANIFESTS, PKI_DIR, SHARED_CERTS, Failed


def control_plane_preflight(root: Path, world: dict[str, Any], control_plane: dict[str, Any],
                             ignored: set[str]) -> None:
    """app/cmd/phases/join/preflight.go runPreflight for a control plane:
    checkIfReadyForAdditionalControlPlane (a stable controlPlaneEndpoint in the cluster's
    ClusterConfiguration; without certificateKey, the shared certificates on disk:
    app/phases/certs/certs.go SharedCertificateExists), then the init checks
    (app/preflight/checks.go RunInitNodeChecks: FileAvailable for the static Pod
    manifests)."""
    problem = None
    if not (world.get("clusterConfiguration") or {}).get("controlPlaneEndpoint"):
        problem = ("unable to add a new control plane instance a cluster that doesn't have "
                   "a stable controlPlaneEndpoint address")
    elif not control_plane.get("certificateKey"):
        missing = next((c for c in SHARED_CERTS if not (root / PKI_DIR / c).exists()), None)
        if missing is not None:
            kind = "certificate" if missing.endswith((".crt", ".pub")) else "key"
            problem = (f"failure loading {kind} for {missing.rsplit('.', 1)[0]}: couldn't "
                       f"load the {kind} file /{PKI_DIR}/{missing}: open /{PKI_DIR}/"
                       f"{missing}: no such file or directory")
    if problem is not None:
        raise Failed("error execution phase preflight: \nOne or more conditions for hosting "
                     f"a new control plane instance is not satisfied.\n\n{problem}\n\n"
                     "Please ensure that:\n* The cluster has a stable controlPlaneEndpoint "
                     "address.\n* The certificates that must be shared among control plane "
                     "instances are provided.\n")
    print("[preflight] Running pre-flight checks before initializing the new control plane "
          "instance")
    _init_node_checks(root, ignored)


def _init_node_checks(root: Path, ignored: set[str]) -> None:
    """app/preflight/checks.go RunInitNodeChecks: the static Pod manifests must not exist
    (FileAvailable--etc-kubernetes-manifests-<name>.yaml)."""
    files_available(root, MANIFESTS, None, ignored)


def files_available(root: Path, files: Sequence[str], failure: str | None,
                     ignored: set[str], found: Sequence[tuple[str, str]] = ()) -> None:
    """app/preflight/checks.go FileAvailableCheck for each of `files`, after the errors
    of other checks (`found`), plus a failure the world injects
    (`preflight:CHECK:MESSAGE`); those not ignored end the run with Error.Error's
    wording."""
    errors = [*found, *((f"FileAvailable--{rel.replace('/', '-')}", f"/{rel} already exists")
                        for rel in files if (root / rel).exists())]
    if failure and failure.startswith("preflight:"):
        _, check, message = failure.split(":", 2)
        errors.append((check, message))
    fatal = [(c, m) for c, m in errors if "all" not in ignored and c.lower() not in ignored]
    if fatal:
        lines = "".join(f"\t[ERROR {c}]: {m}\n" for c, m in fatal)
        raise Failed("error execution phase preflight: [preflight] Some fatal errors "
                     f"occurred:\n{lines}[preflight] If you know what you are doing, you "
                     "can make a check non-fatal with `--ignore-preflight-errors=...`")
