"""The delete policy (`spec.lifecycle.onDelete`): what the agent undoes on the node once
its Machine is being deleted, and the CAPI deletion hook that makes CAPI wait for it.

CAPI deletes a Machine in this order (cluster-api internal/controllers/machine,
reconcileDelete; "Machine deletion process" in the CAPI book): deletionTimestamp set →
pre-drain hooks → drain of the Node → wait for volumes to detach → pre-terminate hooks →
deletion of the infrastructure → the Node deleted → its finalizer removed. Draining is the
controller's job, and resetting the node during it would stop the kubelet while pods are
being evicted. So the agent registers a pre-terminate hook ("Machine deletion phase
hooks": the annotation `HOOK` on its Machine, on while the daemon runs for the Machine:
from the start of its bootstrap until the daemon stops, `let_go`, unless the Machine is
being deleted by then) and runs the policy only once CAPI waits on pre-terminate hooks: v1beta2
condition `Deleting` True with reason `WaitingForPreTerminateHook`, or (CAPI before
v1beta2) v1beta1 condition `PreTerminateDeleteHookSucceeded` False with reason
`WaitingExternalHook`.

On a control-plane Machine KubeadmControlPlane holds the same point with its own hook,
`KCP_HOOK`, and removes the Machine's etcd member before it takes it off (cluster-api
controlplane/kubeadm kubeadmcontrolplane_controller.go, reconcilePreTerminateHook). KCP
decides its order from its own spec.version, which the agent cannot see (in a rollout it
is newer than the Machine's): from Kubernetes 1.31 it waits until every other
pre-terminate hook is gone ("the KCP pre-terminate hook should be the one executed last,
so that kubelet is still working"); before, it goes on without looking at them. Either
way it needs the node's kubelet and etcd member working until its hook is off, and from
1.31 it waits for the agent's. So the agent decides from the hooks on the Machine and
never waits for KCP's: while `kcp-cleanup` is on it, the agent does not reset the node
(the member and the node are KCP's and the infrastructure's to remove), runs its other
steps and takes its hook off; once `kcp-cleanup` is gone (KCP removed the member) the
reset runs as on any node. Either way the member is KCP's to remove, never the agent's:
on a control plane its reset skips kubeadm's remove-etcd-member phase
(`--skip-phases=remove-etcd-member`). Workers are
not held. Then, in order:
- `kubeadm reset -f` (the join undone: kubelet.conf, the kubelet's PKI and flags);
- the release of the IPAM addresses the network phase claimed;
- the removal of the CNI configuration list the cni phase wrote;
each reported as its own condition (hence an Event) on the Machine, then the summary
`NodeCleanedUp`; then the daemon takes its annotation off and CAPI goes on. Every step is
safe to repeat; the steps done are journaled (section `lifecycle`, `DeleteRecord`), so a restart
mid-way resumes after the last one, and a node whose Machine was cleaned up is not
bootstrapped again by that Machine.

A credential that expires would hold the Machine for ever: the agent could no longer take
its hook off. So the daemon looks at its credential (`hook_release_due`): a bearer token
that is a JWT (service account tokens are) says when it expires (`exp`); EXPIRY_MARGIN
before that, unless the token file then holds a rotated token that lives longer (a
projected token rotates itself), the daemon takes the hook off while the credential still
works, and says so on the Machine (`NodeCleanedUp` False, `CredentialExpiring`): a
deletion then goes on without the delete policy instead of never. A token with no expiry
the agent can read (an opaque one, revoked) is the operator's: docs/identity.md.

A step that fails keeps the hook, so the Machine (and with it the infrastructure) stays
until the node is cleaned up: the daemon runs the policy again after a temporary failure
(backoff capped at 5 minutes, forever, as CAPI's own drain waits by default), and after
a permanent one waits for a person (reported on the Machine; restarting the service
tries again). After a failure the hook is never released on its own:
letting CAPI go on would leak the addresses an IPAM backend outside the cluster holds
(only the capi plugin's claims are owned by the Machine) or leave a node that still holds
the join, and CAPI's contract leaves that call to the hook's owner. Removing the
annotation by hand lets CAPI delete the Machine without the cleanup.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import json
import logging
from collections.abc import Callable
from dataclasses import field
from typing import Any

from agent.config import AgentConfig
from agent.errors import AgentError, CommandError, Reason
from agent.host import Host
from agent.ipam.base import PluginEnv
from agent.ipam.release import release_all
from agent.kube.bearer import read_token_file
from agent.kube.client import Client, resource_path
from agent.kube.kubeconfig import Credentials
from agent.kube.machine import GROUP, MachineView
from agent.phases.base import Results
from agent.recordtype import record
from agent.report import Conditions
from agent.state import Journal, Section

log = logging.getLogger(__name__)

"""The journal's `extra` key of the delete policy's record."""
SUMMARY = "NodeCleanedUp"
HOOK_PREFIX = "pre-terminate.delete.hook.machine.cluster.x-k8s.io"
HOOK = f"{HOOK_PREFIX}/machine-agent"
"""The agent's pre-terminate hook: `<lifecycle-point>.delete.hook.machine.cluster.x-k8s.io/
<hook-name>: <owner>` (CAPI proposal 20200602-machine-deletion-phase-hooks)."""
HOOK_OWNER = "machine-agent"
KCP_HOOK = f"{HOOK_PREFIX}/kcp-cleanup"
"""KubeadmControlPlane's pre-terminate hook on its Machines (cluster-api
controlplane/kubeadm/api: PreTerminateHookCleanupAnnotation)."""
CONTROL_PLANE_LABEL = "cluster.x-k8s.io/control-plane"
ETCD_MANIFEST = "/etc/kubernetes/manifests/etcd.yaml"
"""A stacked etcd member's static Pod: the node is a kubeadm control plane."""
MERGE_PATCH = "application/merge-patch+json"


@record(frozen=True)
class Step:
    name: str
    """The step's key in spec.lifecycle.onDelete."""
    condition: str
    success: Reason
    run: Callable[[DeletePolicy], str]
    """Does the step; returns the condition's message."""
    skip: Callable[[DeletePolicy], str | None] | None = None
    """Why the step is left out this time (None: it runs)."""


@record
class DeleteRecord(Section):
    """The delete policy's progress for one Machine, so a restart resumes it."""

    KEY = "lifecycle"
    machine: str = ""
    """The Machine's UID."""
    done: list[str] = field(default_factory=list)
    """The steps done, by name."""
    finished: bool = False


@record
class DeletePolicy:
    host: Host
    config: AgentConfig
    journal: Journal
    conditions: Conditions
    publish: Callable[[bool], None]
    """Publish the conditions to every reporter (final: the outcome is known)."""
    machine_uid: str
    ipam: PluginEnv
    """What the IPAM plugins that release the addresses may use."""
    results: Results
    """What the phases proved (the orchestrator's): a control plane, the CNI list."""
    kcp_cleanup: bool = False
    """KubeadmControlPlane's hook is on the Machine (`kcp_holds`): the node is not reset."""

    def record(self) -> DeleteRecord:
        """This Machine's record, created on first use."""
        rec = self.journal.section(DeleteRecord)
        if rec.machine != self.machine_uid:
            self.journal.drop(DeleteRecord)
            rec = self.journal.section(DeleteRecord)
            rec.machine = self.machine_uid
        return rec

    def run(self) -> AgentError | None:
        """Every configured step not done yet; the error that stopped a step, None when
        all of them succeeded."""
        spec = self.config.spec.lifecycle.on_delete
        rec = self.record()
        steps = [s for s in STEPS if s.name in spec.steps]
        if not steps:
            log.info("the Machine is being deleted; spec.lifecycle.onDelete.policy is "
                     "%s: the node is left as it is", spec.policy)
        for step in steps:
            if step.name in rec.done:
                continue
            skipped = step.skip(self) if step.skip is not None else None
            if skipped is not None:
                log.info("on delete: %s skipped: %s", step.name, skipped)
                rec.done.append(step.name)
                self.journal.save()
                self.conditions.set(step.condition, "True", Reason.Skipped, skipped)
                continue
            self.conditions.set(step.condition, "Unknown", Reason.InProgress, "running")
            self.publish(False)
            try:
                message = step.run(self)
            except AgentError as err:
                log.error("on delete: %s failed: %s", step.name, err)
                then = ("tried again later" if err.temporary else
                        "the Machine is held until the service is restarted (tries "
                        f"again) or annotation {HOOK} is removed (goes on without it)")
                self.conditions.set(step.condition, "False", err.reason, str(err))
                self.conditions.set(SUMMARY, "False", err.reason,
                                    f"{step.condition}: {err}; {then}")
                self.journal.save()
                self.publish(True)
                return err
            log.info("on delete: %s: %s", step.name, message)
            rec.done.append(step.name)
            self.journal.save()
            self.conditions.set(step.condition, "True", step.success, message)
            self.publish(False)
        rec.finished = True
        self.journal.save()
        done = ", ".join(s.condition for s in steps) or "nothing to undo (policy keep)"
        self.conditions.set(SUMMARY, "True", Reason.CleanedUp, f"done: {done}")
        self.publish(True)
        return None


def cleaned_up(journal: Journal, machine_uid: str) -> bool:
    """Whether the delete policy finished for this Machine (it must not bootstrap again)."""
    rec = journal.section(DeleteRecord)
    return rec.machine == machine_uid and rec.finished


# -- the pre-terminate hook --------------------------------------------------------------

def _field(obj: Any, *keys: str) -> Any:
    """obj[k1][k2]..., None where a level is missing or not a mapping (a Machine of a
    wrong shape is no hook and no wait)."""
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def hooked(machine: dict[str, Any]) -> bool:
    """Whether the Machine carries the agent's pre-terminate hook."""
    annotations = _field(machine, "metadata", "annotations")
    return isinstance(annotations, dict) and annotations.get(HOOK) is not None


def hold(client: Client, machine: MachineView, held: bool) -> None:
    """Put the hook on the Machine (held) or take it off: a merge patch of that one
    annotation, which changes nothing when it is already so (RBAC: patch on this Machine
    only)."""
    facts = machine.facts
    path = resource_path(GROUP, machine.version, "machines", namespace=facts.namespace,
                         name=facts.name)
    client.request("PATCH", path, body={"metadata": {"annotations": {
        HOOK: HOOK_OWNER if held else None}}}, content_type=MERGE_PATCH)


def let_go(client: Client, machine: MachineView) -> bool:
    """The agent stops: take its hook off unless the Machine is being deleted (then the
    delete policy owns the hook, and the next start runs it again). The Machine is read
    first and patched at the version read (a merge patch carrying its resourceVersion:
    a deletion in between answers 409 and the hook stays). One attempt each: a stop must
    not wait out an outage. Whether the hook is off."""
    facts = machine.facts
    path = resource_path(GROUP, machine.version, "machines", namespace=facts.namespace,
                         name=facts.name)
    current = client.request("GET", path, attempts=STOP_ATTEMPTS)
    if _field(current, "metadata", "deletionTimestamp") or not hooked(current):
        return not hooked(current)
    client.request("PATCH", path, body={"metadata": {
        "resourceVersion": _field(current, "metadata", "resourceVersion"),
        "annotations": {HOOK: None}}}, content_type=MERGE_PATCH, attempts=STOP_ATTEMPTS)
    return True


STOP_ATTEMPTS = 1
"""Attempts of each request that takes the hook off when the agent stops: two requests
of spec.management.requestTimeout (10 s) at most stay within the unit's TimeoutStopSec
(30 s)."""


def waiting_for_hook(machine: dict[str, Any]) -> bool:
    """Whether CAPI's machine controller waits on pre-terminate hooks (the drain and the
    volume detach are over). Read as v1beta2 the v1beta1 conditions are under
    `status.deprecated.v1beta1`; read as v1beta1 the v1beta2 ones under
    `status.v1beta2`. KubeadmControlPlane's hook is never waited for (`kcp_holds`)."""
    lists = [_field(machine, "status", "conditions"),
             _field(machine, "status", "v1beta2", "conditions"),
             _field(machine, "status", "deprecated", "v1beta1", "conditions")]
    waiting = {("Deleting", "True", "WaitingForPreTerminateHook"),
               ("PreTerminateDeleteHookSucceeded", "False", "WaitingExternalHook")}
    return any((c.get("type"), c.get("status"), c.get("reason")) in waiting
               for conditions in lists if isinstance(conditions, list)
               for c in conditions if isinstance(c, dict))


def kcp_holds(machine: dict[str, Any]) -> bool:
    """Whether KubeadmControlPlane's kcp-cleanup hook is on the Machine: KCP has not
    removed its etcd member yet and needs the node's kubelet and etcd until it has; from
    Kubernetes 1.31 it also waits for the agent's hook to go first."""
    annotations = _field(machine, "metadata", "annotations")
    return isinstance(annotations, dict) and annotations.get(KCP_HOOK) is not None


def is_control_plane(machine: dict[str, Any]) -> bool:
    labels = _field(machine, "metadata", "labels")
    return isinstance(labels, dict) and CONTROL_PLANE_LABEL in labels


# -- the credential's expiry -------------------------------------------------------------

EXPIRY_MARGIN = 600.0
"""Seconds before the credential expires when the hook comes off (unless rotated): time
for the patch, retries included, while the credential still works."""


def token_expiry(token: str | None) -> dt.datetime | None:
    """When a JWT bearer token expires (its `exp` claim, read without verifying: the
    agent only schedules by it); None for a token that is not a JWT or says nothing."""
    parts = (token or "").split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        exp = claims.get("exp") if isinstance(claims, dict) else None
        if isinstance(exp, bool) or not isinstance(exp, int | float):
            return None
        return dt.datetime.fromtimestamp(exp, dt.UTC)
    except (ValueError, binascii.Error, OverflowError, OSError):
        return None


def hook_release_due(creds: Credentials) -> dt.datetime | None:
    """When the hook must come off unless the credential is rotated: EXPIRY_MARGIN before
    the current token expires (the token file read again, as the client reads it on a
    401: a real path, so a rotation moves it); None when the token says nothing about
    its expiry."""
    token = creds.token
    if creds.token_file:
        with contextlib.suppress(OSError, ValueError):
            token = read_token_file(creds.token_file)
    expiry = token_expiry(token)
    return expiry - dt.timedelta(seconds=EXPIRY_MARGIN) if expiry else None


# -- the steps ---------------------------------------------------------------------------

def kubeadm_reset(policy: DeletePolicy) -> str:
    """`kubeadm reset -f`; on a control plane without its remove-etcd-member phase: the
    member is KCP's to remove (its kcp-cleanup hook)."""
    spec = policy.config.spec
    argv = [spec.join.kubeadm_path, "reset", "-f"]
    if policy.results.joined_control_plane() or policy.host.exists(ETCD_MANIFEST):
        argv.append("--skip-phases=remove-etcd-member")
    result = policy.host.run(argv, timeout=float(spec.lifecycle.on_delete.reset_timeout),
                             check=False, sandboxed=False)
    if not result.ok:
        raise CommandError(f"{' '.join(argv)} exited {result.returncode}: "
                           f"{policy.host.redact(result.tail(500))}",
                           hint="run it by hand; the node still holds the join")
    # The join was undone: a later bootstrap (another Machine) must join again.
    policy.journal.phases.pop("join", None)
    return f"{' '.join(argv)} undid the join"


def reset_left_to_kcp(policy: DeletePolicy) -> str | None:
    """Why the node is not reset: KubeadmControlPlane's hook is on the Machine."""
    if not policy.kcp_cleanup:
        return None
    return (f"not reset: KubeadmControlPlane's hook {KCP_HOOK} is on the Machine; KCP "
            "removes this node's etcd member with its kubelet still working, after the "
            "agent's hook is off, and the infrastructure provider then deletes the node")


def release_addresses(policy: DeletePolicy) -> str:
    """Give back the IPAM addresses this node claimed, as `machine-agent reset` does
    (from the journal's IPAM ledger, each through the plugin that claimed it)."""
    outcomes = release_all(policy.journal, policy.config.spec.ipam.plugins, policy.ipam)
    errors = [o.error for o in outcomes if o.error is not None]
    if errors:
        raise AgentError("; ".join(str(o) for o in outcomes), reason=errors[0].reason,
                         temporary=all(e.temporary for e in errors),
                         hint="the addresses not released are kept in the journal; "
                              "`machine-agent reset` tries them again")
    if not outcomes:
        return "no IPAM addresses were claimed by this node"
    return "; ".join(str(o) for o in outcomes)


def remove_cni_config(policy: DeletePolicy) -> str:
    written = policy.results.cni_config_lists()
    if not written:
        return "the agent wrote no CNI configuration list"
    said = []
    for phase, path in written.items():
        removed = policy.host.remove(path)
        policy.journal.phases.pop(phase, None)
        said.append(f"removed {path}" if removed else f"{path} was already gone")
    return "; ".join(said)


STEPS = (
    Step("kubeadmReset", "KubeadmReset", Reason.NodeReset, kubeadm_reset, reset_left_to_kcp),
    Step("releaseAddresses", "AddressesReleased", Reason.AddressesReleased,
         release_addresses),
    Step("removeCniConfig", "CNIConfigRemoved", Reason.CNIConfigRemoved, remove_cni_config),
)
