"""The delete policy (`spec.lifecycle.onDelete`): what the agent undoes on the node once
its Machine is being deleted.

CAPI marks the Machine (`metadata.deletionTimestamp`), drains and deletes the Node, and
keeps the Machine until its finalizers are gone (cluster-api
internal/controllers/machine/machine_controller.go, reconcileDelete). Draining is the
controller's job; while the Machine still exists the agent runs, in order:
- `kubeadm reset -f` (the join undone: kubelet.conf, the kubelet's PKI and flags);
- the release of the IPAM addresses the network phase claimed;
- the removal of the CNI configuration list the cni phase wrote;
and reports each step as its own condition (hence an Event) on the Machine, then the
summary `NodeCleanedUp`. Every step is safe to repeat; the steps done are journaled
(`Journal.extra["lifecycle"]`), so a restart mid-way resumes after the last one, and a
node whose Machine was cleaned up is not bootstrapped again by that Machine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.config import AgentConfig
from agent.errors import AgentError, CommandError, Reason
from agent.host import Host
from agent.ipam.base import PluginEnv
from agent.ipam.release import release_all
from agent.report import Conditions
from agent.state import Journal

log = logging.getLogger(__name__)

OWNER = "lifecycle"
"""The journal's `extra` key of the delete policy's record."""
SUMMARY = "NodeCleanedUp"


@dataclass(frozen=True)
class Step:
    name: str
    """The step's key in spec.lifecycle.onDelete."""
    condition: str
    success: Reason
    run: Callable[[DeletePolicy], str]
    """Does the step; returns the condition's message."""


@dataclass
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

    def record(self) -> dict[str, Any]:
        """This Machine's record, created on first use."""
        rec = self.journal.extra.get(OWNER)
        if not isinstance(rec, dict) or rec.get("machine") != self.machine_uid:
            rec = {"machine": self.machine_uid, "done": [], "finished": False}
            self.journal.extra[OWNER] = rec
        return rec

    def run(self) -> bool:
        """Every configured step not done yet; True when all of them succeeded."""
        spec = self.config.spec.lifecycle.on_delete
        rec = self.record()
        steps = [s for s in STEPS if s.name in spec.steps]
        if not steps:
            log.info("the Machine is being deleted; spec.lifecycle.onDelete.policy is "
                     "%s: the node is left as it is", spec.policy)
        for step in steps:
            if step.name in rec["done"]:
                continue
            self.conditions.set(step.condition, "Unknown", Reason.InProgress, "running")
            self.publish(False)
            try:
                message = step.run(self)
            except AgentError as err:
                log.error("on delete: %s failed: %s", step.name, err)
                self.conditions.set(step.condition, "False", err.reason, str(err))
                self.conditions.set(SUMMARY, "False", err.reason,
                                    f"{step.condition}: {err}")
                self.journal.save()
                self.publish(True)
                return False
            log.info("on delete: %s: %s", step.name, message)
            rec["done"].append(step.name)
            self.journal.save()
            self.conditions.set(step.condition, "True", step.success, message)
            self.publish(False)
        rec["finished"] = True
        self.journal.save()
        done = ", ".join(s.condition for s in steps) or "nothing to undo (policy keep)"
        self.conditions.set(SUMMARY, "True", Reason.CleanedUp, f"done: {done}")
        self.publish(True)
        return True


def cleaned_up(journal: Journal, machine_uid: str) -> bool:
    """Whether the delete policy finished for this Machine (it must not bootstrap again)."""
    rec = journal.extra.get(OWNER)
    return isinstance(rec, dict) and rec.get("machine") == machine_uid and bool(
        rec.get("finished"))


# -- the steps ---------------------------------------------------------------------------

def kubeadm_reset(policy: DeletePolicy) -> str:
    spec = policy.config.spec
    argv = [spec.join.kubeadm_path, "reset", "-f"]
    result = policy.host.run(argv, timeout=float(spec.lifecycle.on_delete.reset_timeout),
                             check=False, sandboxed=False)
    if not result.ok:
        raise CommandError(f"{' '.join(argv)} exited {result.returncode}: "
                           f"{policy.host.redact(result.tail(500))}",
                           hint="run it by hand; the node still holds the join")
    # The join was undone: a later bootstrap (another Machine) must join again.
    policy.journal.phases.pop("join", None)
    return f"{' '.join(argv)} undid the join"


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
    rec = policy.journal.phases.get("cni")
    path = rec.result.get("conflist") if rec is not None else None
    if not path:
        return "the agent wrote no CNI configuration list"
    removed = policy.host.remove(str(path))
    policy.journal.phases.pop("cni", None)
    return f"removed {path}" if removed else f"{path} was already gone"


STEPS = (
    Step("kubeadmReset", "KubeadmReset", Reason.NodeReset, kubeadm_reset),
    Step("releaseAddresses", "AddressesReleased", Reason.AddressesReleased,
         release_addresses),
    Step("removeCniConfig", "CNIConfigRemoved", Reason.CNIConfigRemoved, remove_cni_config),
)
