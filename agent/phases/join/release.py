"""A joined node's Kubernetes release changed in place (spec.join.inPlaceVersion, set by
an in-place update: agent/inplace).

A worker's patch upgrade as kubeadm documents it ("Upgrading Linux nodes"): the new
release's `kubeadm upgrade node`, which on a node without a kube-apiserver manifest only
rewrites the kubelet's configuration from the cluster's kubelet-config ConfigMap
(cmd/kubeadm/app/cmd/upgrade/node.go; phases preflight, control-plane, kubelet-config),
then the new kubelet in place of the old one and the kubelet restarted. The agent
installs no packages: the release's `kubeadm` and `kubelet` come from
spec.join.versionsDir/RELEASE, where the image or configuration management put them.

What the change replaces (the kubelet program and /var/lib/kubelet/config.yaml) is kept
beside the journal first, and the change is journaled before it starts, so a
configuration naming the release before (the previous one, as a rollback applies it)
puts both back, and a run cut short resumes or undoes it: the node is never left with
half a release. Only a newer patch release of the running minor one is made in place; any
other release named there is left alone, with a warning (the AgentConfig object is
shared by a MachineDeployment's nodes, some of them newer already; and a minor upgrade
is a rollout, after the control plane's).
"""

from __future__ import annotations

import re

from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.phases.base import Change, PhaseContext
from agent.phases.join.kubeletrestart import restart_kubelet
from agent.phases.join.result import JoinRecord, ReleaseChange

KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"
KEPT = "/var/lib/machine-agent/kept-release"
"""The kubelet program and its configuration a release change replaced (root only)."""
_VERSION = re.compile(r"Kubernetes (v\d+\.\d+\.\d+)\s*")
_RELEASE = re.compile(r"v(\d+)\.(\d+)\.(\d+)")


def release_changes(ctx: PhaseContext) -> list[Change]:
    """What brings the node to spec.join.inPlaceVersion, or back to the release before
    the last change (also first when that change was cut short and another release is
    asked for now); nothing when the node runs what is asked."""
    spec = ctx.config.spec.join
    record = ctx.journal.section(JoinRecord)
    target, last = spec.in_place_version, record.release
    first: list[Change] = []
    if last is not None and last.previous and (
            target in (None, last.previous) or (not last.done and target != last.release)):
        first = [_put_back(ctx, record, last)]
        if target in (None, last.previous):
            return first
        running = last.previous
    elif target is None:
        return []
    elif last is not None and target == last.release:
        return [] if last.done else [_upgrade(ctx, record, target, last.previous, False)]
    else:
        running = last.release if last is not None else kubelet_release(ctx.host,
                                                                         spec.kubelet_binary)
    assert target is not None
    if running == target:
        return first
    if not newer_patch(running, target):
        # The AgentConfig object is shared by a MachineDeployment's nodes, some already
        # newer; and a minor release is a rollout (the control plane first).
        ctx.log.warning("spec.join.inPlaceVersion %s is not a newer patch release of %s, "
                        "which the node runs: left as it is", target, running)
        return first
    return [*first, _upgrade(ctx, record, target, running, True)]


def kubelet_release(host: Host, kubelet: str) -> str:
    """The release the node's kubelet says it is (`kubelet --version`)."""
    done = host.run([str(host.path(kubelet)), "--version"], mutates=False, check=False,
                    timeout=30)
    found = _VERSION.fullmatch(done.stdout) if done.ok else None
    if found is None:
        raise PermanentError(
            f"{kubelet} --version did not say its release (exit {done.returncode}: "
            f"{(done.stdout or done.stderr).strip()[:200]!r})", reason=Reason.NotOnImage,
            hint="set spec.join.kubeletBinary to the kubelet the node runs")
    return found.group(1)


def newer_patch(running: str, target: str) -> bool:
    """Whether `target` is a newer patch release of `running` (both vMAJOR.MINOR.PATCH)."""
    old, new = _RELEASE.fullmatch(running), _RELEASE.fullmatch(target)
    if old is None or new is None:
        return False
    return old.group(1, 2) == new.group(1, 2) and int(new.group(3)) > int(old.group(3))


def _binaries(ctx: PhaseContext, release: str) -> tuple[str, str]:
    base = f"{ctx.config.spec.join.versions_dir}/{release}"
    missing = [name for name in ("kubeadm", "kubelet")
               if not ctx.host.is_executable(f"{base}/{name}")]
    if missing:
        raise PermanentError(
            f"Kubernetes {release} is not on this node: {', '.join(missing)} missing or not "
            f"executable in {base}", reason=Reason.NotOnImage,
            hint=f"put the release's kubeadm and kubelet in {base} (the image, or your "
                 "configuration management) and apply again, or roll the Machines out")
    return f"{base}/kubeadm", f"{base}/kubelet"


def _upgrade(ctx: PhaseContext, record: JoinRecord, target: str, previous: str,
             keep: bool) -> Change:
    """kubeadm upgrade node with the target's kubeadm, its kubelet installed, the kubelet
    restarted healthy; `keep`: save what it replaces first (not when resuming)."""
    spec = ctx.config.spec.join
    kubeadm, kubelet = _binaries(ctx, target)

    def upgrade(host: Host) -> None:
        if keep:
            host.write_file(f"{KEPT}/kubelet", host.read_bytes(spec.kubelet_binary),
                            mode=0o700, dir_mode=0o700)
            config = host.read_bytes(KUBELET_CONFIG) if host.exists(KUBELET_CONFIG) else b""
            host.write_file(f"{KEPT}/config.yaml", config, mode=0o600, dir_mode=0o700)
        record.release = ReleaseChange(target, previous)
        ctx.journal.save()  # before the first change: a rollback or a rerun starts here
        ctx.progress(f"kubeadm upgrade node ({target})")
        done = host.run([str(host.path(kubeadm)), "upgrade", "node"],
                        timeout=float(spec.timeout), check=False, sandboxed=False)
        if not done.ok:
            raise PermanentError(
                f"kubeadm {target} upgrade node failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-600:]}", reason=Reason.CommandFailed,
                hint="fix what kubeadm says (its output is quoted); the kubelet and its "
                     f"configuration of {previous} are put back")
        host.write_file(spec.kubelet_binary, host.read_bytes(kubelet), mode=0o755)
        restart_kubelet(host, spec, f"Kubernetes {target}", ctx.progress,
                        fix=f"a kubelet built for another machine or a configuration it "
                            f"refuses stops it); check {spec.versions_dir}/{target}/kubelet")
        try:
            now = kubelet_release(host, spec.kubelet_binary)
        except PermanentError as err:
            raise PermanentError(f"the kubelet of {target} does not run: {err.message}",
                                 reason=Reason.KubeletNotHealthy,
                                 hint=f"check {spec.versions_dir}/{target}/kubelet (built "
                                      "for this machine?)") from err
        if now != target:
            raise PermanentError(f"{spec.kubelet_binary} says {now} after the change to "
                                 f"{target}", reason=Reason.NotOnImage,
                                 hint=f"the kubelet in {spec.versions_dir}/{target} is "
                                      "another release's")
        record.release = ReleaseChange(target, previous, done=True)
        ctx.journal.save()

    return Change(f"release:{target}", f"upgrade the node from Kubernetes {previous} to "
                  f"{target} in place: kubeadm upgrade node, the kubelet of "
                  f"{spec.versions_dir}/{target}, restarted and proven healthy",
                  upgrade, argv=(kubeadm, "upgrade", "node"))


def _put_back(ctx: PhaseContext, record: JoinRecord, last: ReleaseChange) -> Change:
    spec = ctx.config.spec.join

    def put_back(host: Host) -> None:
        host.write_file(spec.kubelet_binary, host.read_bytes(f"{KEPT}/kubelet"), mode=0o755)
        config = host.read_bytes(f"{KEPT}/config.yaml")
        if config:
            host.write_file(KUBELET_CONFIG, config, mode=0o644)
        restart_kubelet(host, spec, f"Kubernetes {last.previous} put back", ctx.progress,
                        fix=f"the kubelet and configuration of {last.previous} were put "
                            f"back as they were: see why it does not start)")
        record.release = ReleaseChange(last.previous, "", done=True)
        ctx.journal.save()  # before the kept copies go: a run cut short reads them again
        host.remove_tree(KEPT)

    return Change(f"release-back:{last.previous}",
                  f"put Kubernetes {last.previous} back in place of {last.release} (the "
                  f"kubelet and its configuration kept before the change), restart the "
                  "kubelet and wait for it to answer healthy", put_back)
