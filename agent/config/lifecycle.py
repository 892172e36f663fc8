"""`spec.lifecycle`: what the daemon does after the bootstrap, while it watches its Machine.

Two events matter. The Machine is deleted (CAPI sets `metadata.deletionTimestamp`, drains
the Node, then waits on pre-terminate hooks, the agent's among them): the agent undoes
what it did on the node (`onDelete`, agent.daemon.deletion). The AgentConfig the Machine
points at changes: the agent plans and applies the phases named in `reconfigure` again
(never join: a joined node is never joined again).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from agent.config import checks
from agent.config.fields import Duration, PhaseName, setting
from agent.recordtype import record

Problem = tuple[str, str, str | None]


@record(frozen=True)
class OnDeleteSpec:
    policy: Literal["reset", "keep"] = setting(
        "reset: undo the node's set-up with the steps below, reporting each, once CAPI "
        "has drained the Node and waits on the agent's pre-terminate hook (which holds "
        "the Machine until every step ran); keep: leave the node as it is (e.g. the "
        "infrastructure provider wipes the disk). Draining the Node is CAPI's job "
        "either way.",
        default="reset")
    kubeadm_reset: bool = setting("Run `kubeadm reset -f` (spec.join.kubeadmPath).",
                                  default=True)
    release_addresses: bool = setting(
        "Give back the IPAM addresses the network phase claimed.", default=True)
    remove_cni_config: bool = setting(
        "Remove the CNI configuration list the cni phase wrote.", default=True)
    reset_timeout: Duration = setting("Time-out of `kubeadm reset -f`.",
                                      default=Duration(120), check=checks.positive)

    @property
    def steps(self) -> list[str]:
        """The steps to run, in order (none with policy keep)."""
        if self.policy == "keep":
            return []
        wanted = (("kubeadmReset", self.kubeadm_reset),
                  ("releaseAddresses", self.release_addresses),
                  ("removeCniConfig", self.remove_cni_config))
        return [name for name, on in wanted if on]


@record(frozen=True)
class LifecycleSpec:
    on_delete: OnDeleteSpec = setting(
        "What the agent does when its Machine is being deleted.", factory=OnDeleteSpec)
    reconfigure: list[PhaseName] | None = setting(
        "Phases planned and applied again when the Machine's AgentConfig (the ConfigMap "
        "or Secret of its machine-agent.io/config annotation) changes; unset: every phase "
        "that can be (network, time, and join, which on a joined node only keeps the "
        "kubelet's extra flags and spec.join.files: kubeadm never runs again); empty: "
        "changes wait for the next boot. cni is never redone on a running node.",
        default=None)
    watch: bool = setting(
        "Watch the Machine and its AgentConfig after the bootstrap (needs "
        "spec.management). Off: the daemon only waits to be stopped.", default=True)

    def validate(self) -> Iterator[Problem]:
        seen: set[str] = set()
        for index, phase in enumerate(self.reconfigure or ()):
            if phase in seen:
                yield (f"reconfigure[{index}]", f"{phase} is listed twice", "list it once")
            seen.add(phase)
        if self.on_delete.policy == "keep" and not all(
                (self.on_delete.kubeadm_reset, self.on_delete.release_addresses,
                 self.on_delete.remove_cni_config)):
            yield ("onDelete.policy", "keep runs no step: turning single steps off has "
                   "no effect", "set policy: reset to run the steps left on")

