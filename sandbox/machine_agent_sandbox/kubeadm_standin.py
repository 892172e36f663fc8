"""A faithful stand-in for `kubeadm` (and `kubelet --version`), for tests and the demo.

kubeadm cannot be installed here. This program behaves like it where the agent can see:
`join --config FILE` reads the JoinConfiguration strictly per the real schema
(kubeadm.k8s.io/v1beta3 and v1beta4), runs the join preflight, discovery, kubelet-start
in kubeadm's order, writes what kubeadm writes under $KUBEADM_STANDIN_ROOT, and fails with
kubeadm's own words (copied from kubernetes/kubernetes cmd/kubeadm, file named at each);
`init --config FILE` reads the InitConfiguration and ClusterConfiguration and makes the
cluster (its etcd, its tokens); a JoinConfiguration with controlPlane runs the control-
plane preflight, prepare (certificates, downloaded with certificateKey) and etcd join;
`reset -f [--skip-phases=...]` removes what they wrote (and the etcd member); `upgrade
node` does a worker's part of a patch upgrade (machine_agent_sandbox.kubeadm.upgrade); exit
status and error format as kubeadm's of the world's version (before 1.33: 1, 2 for a bare
preflight error, 3 for validation; from 1.33: 1 and "error: ", machine_agent_sandbox.
kubeadm.errors); `version -o short` prints the version.

After a successful join it also does what the kubelet then does on a real node: its TLS
bootstrap ends in a client certificate for `system:node:<name>` (group `system:nodes`)
signed by the cluster (the API stand-in's CSR signer hook), stored as the kubelet stores
it and named by kubelet.conf (machine_agent_sandbox.kubeadm.tls_bootstrap); with it the
kubelet registers its Node, NotReady until a CNI configuration is in /etc/cni/net.d (the
kubelet's network readiness).

The workload cluster it joins is a JSON "world" file ($KUBEADM_STANDIN_WORLD):
  version             kubeadm/kubelet version, default v1.31.2
  tokens              {token id: secret} the cluster knows (absent: any token works).
                      With `apiServer`, discovery is kubeadm's (token.go): cluster-info is
                      published there signed for each of these tokens, read anonymously,
                      its JWS signature and CA pin checked
  caCertHash          stands for the cluster CA's pin (absent: the real pin of the
                      `apiServer` CA is checked; without an API, any pin works)
  apiServer           {"ca": CA file, "signerToken": token}: the workload API stand-in at
                      the discovery endpoint (its CA, as cluster-info holds it; a token
                      allowed to issue credentials, standing for the CSR signer); absent:
                      no API to register with, kubelet.conf carries no credentials
  readyNodes          names of Nodes already Ready in the cluster
  failNext            failures for the next joins, one consumed per join:
                      "kubelet-unhealthy", "preflight:<Check>:<message>", "hang:<seconds>",
                      "phase-error:<phase>:<message>" (any other error of a phase),
                      "node-not-registered" (join succeeds; the kubelet never registers),
                      "killed-after:kubelet-conf" / "killed-after:registered" (kubeadm and
                      the agent that ran it are killed with SIGKILL right after kubelet.conf
                      is written / after the Node registered: a power cut mid-join)
  joins               (written) the names that joined, in order (written when kubeadm
                      ends: a kubeadm killed after its Node registered is not in it;
                      `registrations` on the Node counts such a join too)
  invocations         (written) every join, init, reset and upgrade node run, in order
  etcdMembers         (written by init and a control-plane join; reset removes) the
                      stacked etcd members
  clusterConfiguration (written by init) what a joining control plane reads
  uploadedCerts       {"key": certificateKey}: the kubeadm-certs Secret init uploaded
Run as `python -m machine_agent_sandbox.kubeadm_standin [kubelet] ARGS` (or
`restart-kubelet`: the node's `systemctl restart kubelet`); `install()` writes `kubeadm`,
`kubelet` and `restart-kubelet` wrappers into a bin directory with the root and world
baked in, and the node's kubelet program; `install_release()` a release's kubeadm and
kubelet where the agent takes them for an in-place release change.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machine_agent_sandbox.files import write_atomic
from machine_agent_sandbox.kubeadm import kubelet_service
from machine_agent_sandbox.kubeadm.errors import exit_with
from machine_agent_sandbox.kubeadm.init import init
from machine_agent_sandbox.kubeadm.join import join
from machine_agent_sandbox.kubeadm.node import KUBELET_PROGRAM, Failed
from machine_agent_sandbox.kubeadm.reset_command import reset
from machine_agent_sandbox.kubeadm.upgrade import upgrade_node

RELEASES = "opt/machine-agent/kubernetes"
"""spec.join.versionsDir's default, under the node's root."""


COMMANDS: dict[tuple[str, ...], Callable[[Path, dict[str, Any], list[str]], int]] = {
    ("join",): join, ("init",): init, ("reset",): reset, ("upgrade", "node"): upgrade_node}


def main(argv: list[str]) -> int:
    root = Path(os.environ.get("KUBEADM_STANDIN_ROOT", "/"))
    world_path = os.environ.get("KUBEADM_STANDIN_WORLD")
    world: dict[str, Any] = json.loads(Path(world_path).read_text()) if world_path else {}
    # a release's own binaries (install_release) say their release, not the world's
    version = os.environ.get("KUBEADM_STANDIN_RELEASE") or world.get("version", "v1.31.2")
    try:
        if argv[:1] == ["kubelet"]:
            if os.environ.get("KUBEADM_STANDIN_BROKEN"):
                print("kubelet: cannot execute binary file: Exec format error",
                      file=sys.stderr)
                return 126
            if argv[1:] == ["--version"]:
                print(f"Kubernetes {version}")
                return 0
            raise Failed("the kubelet stand-in only answers --version")
        if argv[:1] == ["restart-kubelet"]:
            return kubelet_service.restart(root)
        if argv[:3] == ["version", "-o", "short"]:
            print(version)
            return 0
        verb = tuple(argv[:2] if argv[:2] == ["upgrade", "node"] else argv[:1])
        command = COMMANDS.get(verb)
        if command is not None:
            world.setdefault("invocations", []).append(" ".join(verb))  # every run, counted
            try:
                return command(root, world, argv[len(verb):])
            finally:
                if world_path:
                    write_atomic(Path(world_path), json.dumps(world, indent=1))
        raise Failed(f"unknown command {' '.join(argv[:1])!r} for \"kubeadm\"")
    except Failed as err:
        return exit_with(str(err), err.code, version)


def install(bin_dir: Path, root: Path, world: Path) -> None:
    """Write `kubeadm` and `kubelet` wrappers into bin_dir, bound to root and world, and
    `restart-kubelet`, the node's `systemctl restart kubelet` (kubeadm.kubelet_service);
    and the node's kubelet program (KUBELET_PROGRAM under root), of the world's release."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    env = f"KUBEADM_STANDIN_ROOT='{root}' KUBEADM_STANDIN_WORLD='{world}'"
    for name, extra in (("kubeadm", ""), ("kubelet", " kubelet"),
                        ("restart-kubelet", " restart-kubelet")):
        _wrapper(bin_dir / name, env, extra)
    release = json.loads(world.read_text()).get("version", "v1.31.2")
    _wrapper(root / KUBELET_PROGRAM, f"{env} KUBEADM_STANDIN_RELEASE='{release}'", " kubelet")


def install_release(root: Path, world: Path, release: str, *, broken: bool = False) -> None:
    """A release's `kubeadm` and `kubelet` where the agent takes them for an in-place
    release change (RELEASES/RELEASE under root); `broken`: a kubelet that does not run
    (an image built for another architecture)."""
    env = f"KUBEADM_STANDIN_ROOT='{root}' KUBEADM_STANDIN_WORLD='{world}' " \
          f"KUBEADM_STANDIN_RELEASE='{release}'"
    base = root / RELEASES / release
    _wrapper(base / "kubeadm", env, "")
    _wrapper(base / "kubelet", env + (" KUBEADM_STANDIN_BROKEN=1" if broken else ""),
             " kubelet")


def _wrapper(path: Path, env: str, extra: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{env} exec '{sys.executable}' -m "
                    f"machine_agent_sandbox.kubeadm_standin{extra} \"$@\"\n")
    path.chmod(0o755)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
