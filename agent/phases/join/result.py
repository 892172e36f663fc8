"""What the join phase proved, journaled for cni (the Node's name), `status` and the
condition; and what it keeps in the journal across runs (attempts, commands run)."""

from __future__ import annotations

from dataclasses import field

from agent.phases.base import PhaseResult
from agent.phases.facts import ControlPlaneMember, Fact, NodeName
from agent.phases.join.kubeletflags import KeptFlag
from agent.recordtype import record
from agent.state import Section


@record
class JoinResult(PhaseResult):
    node: str | None = None
    """The node name kubeadm joined with."""
    api_server: str | None = None
    local_api_server: str | None = None
    """A control plane's own API server, which its kubelet.conf may name instead."""
    kubeadm: str | None = None
    """`init` for the first control plane; None: `join` (left out of the journal, as
    journals before it have it)."""
    control_plane: bool | None = None
    """True on a control plane; None otherwise."""
    kubernetes_version: str | None = None
    join_configuration: str | None = None
    """The apiVersion of the kubeadm JoinConfiguration used."""
    attempts: int = 0
    node_registered: str | None = None
    """The Node the kubelet registered, once seen."""
    failed_commands: list[str] = field(default_factory=list)
    """runcmd entries that failed in an earlier run (not run again on a joined node)."""

    def facts(self) -> list[Fact]:
        name = self.node_registered or self.node
        return [*([NodeName(name)] if name else []),
                *([ControlPlaneMember()] if self.control_plane else [])]


@record
class JoinAttempt:
    """One `kubeadm join` attempt."""

    attempt: int = 0
    at: str = ""
    outcome: str = ""
    reset_before: bool = False
    """Whether `kubeadm reset -f` ran first (files of an earlier attempt)."""
    output_tail: str | None = None
    reason: str | None = None
    message: str | None = None


@record
class CommandRun:
    """One runcmd (or bootcmd) entry of the bootstrap data, as it ran."""

    index: int = 0
    command: str = ""
    exit_status: int | None = None
    """None: not found, or it did not run to its end."""
    output_tail: str = ""
    kind: str | None = None
    """`bootcmd`, or None: a runcmd entry. Their indexes count apart."""


@record
class KubeadmReset:
    """A `kubeadm reset -f` before an attempt, and why."""

    at: str = ""
    why: str = ""
    exit_status: int | None = None


@record
class JoinInFlight:
    """A `kubeadm join` journaled before kubeadm starts, removed once it finished or the
    node was reset. kubeadm writes kubelet.conf long before it is done (a control plane's
    etcd member and mark-control-plane come after), so after a kill kubelet.conf alone
    does not prove a join."""

    attempt: int = 0
    at: str = ""
    node: str = ""
    control_plane: bool = False


@record(frozen=True)
class KeptFile:
    """A file of spec.join.files the agent wrote in place: the mode and owner of the one
    it replaced (its content saved beside the journal), or None when there was none."""

    mode: int | None = None
    uid: int = 0
    gid: int = 0


@record(frozen=True)
class ReleaseChange:
    """An in-place change of the node's Kubernetes release (agent.phases.join.release):
    the release it makes, the one it replaced (whose kubelet and kubelet configuration
    are kept beside the journal; empty: none kept), and whether it was proven."""

    release: str = ""
    previous: str = ""
    done: bool = False


@record
class JoinRecord(Section):
    """What the join phase keeps across runs: its attempts (the last ones), the resets
    before them, and the bootstrap data's commands as they ran (never run twice)."""

    KEY = "join"
    in_flight: JoinInFlight | None = None
    """Set while a kubeadm join runs: journaled before kubeadm starts, removed once it
    finished or the node was reset (agent.phases.join.managed.node_state)."""
    attempts: list[JoinAttempt] = field(default_factory=list)
    resets: list[KubeadmReset] = field(default_factory=list)
    commands: list[CommandRun] = field(default_factory=list)
    named: str | None = None
    """The node name the kubeadm config file gave when kubeadm ran, where the
    preKubeadmCommands replace a placeholder in it (Flatcar's `sed`)."""
    kept_files: dict[str, KeptFile] | None = None
    """The files of spec.join.files written in place on the joined node, by path
    (agent.phases.join.inplace)."""
    kubelet_flags: dict[str, KeptFlag] | None = None
    """The kubelet flags the agent keeps in kubeadm-flags.env on the joined node, each
    with the value it replaced (agent.phases.join.kubeletflags)."""
    release: ReleaseChange | None = None
    """The last in-place change of the node's Kubernetes release, journaled before it is
    made (agent.phases.join.release)."""
