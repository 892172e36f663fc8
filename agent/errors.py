"""The error taxonomy and the closed vocabulary of condition reasons.

Every error a user can see is an `AgentError`: it names a `Reason` (what goes on the
Machine's condition), says what failed and what to do, and whether it is temporary
(retried with jittered backoff) or permanent (the phase stops and reports).
"""

from __future__ import annotations

import enum

from agent.printable import printable
from agent.recordtype import record

SHOWN = 40
"""Characters of a value an error echoes: a hostile value may be megabytes."""


def shown(value: object, limit: int = SHOWN) -> str:
    """A short, printable prefix of `value` (a string, or any value's repr) for an error
    message, escaped: no line breaks or control characters reach a log line or a
    condition."""
    if not isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else text[:limit] + "..."
    return repr(value[:limit]) + (f" (first {limit} of {len(value)} characters)"
                                  if len(value) > limit else "")


@record(frozen=True)
class ReasonInfo:
    meaning: str
    fix: str
    healthy: bool = False
    """The reason says nothing is wrong (a success, progress, a step done). A True
    condition with any other reason completed with a problem the node lives with:
    `status` says degraded. A phase's success reason must be healthy (the registry
    refuses a plugin phase whose is not)."""


class Reason(enum.StrEnum):
    """Condition reasons the agent may report. Closed: add here, document here."""

    # summary and progress
    Bootstrapped = "Bootstrapped"
    Completed = "Completed"
    InProgress = "InProgress"
    Pending = "Pending"
    Skipped = "Skipped"
    UpToDate = "UpToDate"
    # configuration and local state
    ConfigInvalid = "ConfigInvalid"
    CloudInitNotFinished = "CloudInitNotFinished"
    StateUnwritable = "StateUnwritable"
    CommandFailed = "CommandFailed"
    CommandTimeout = "CommandTimeout"
    InternalError = "InternalError"
    NotOnImage = "NotOnImage"
    # management cluster
    ManagementUnreachable = "ManagementUnreachable"
    ManagementUnauthorized = "ManagementUnauthorized"
    ManagementForbidden = "ManagementForbidden"
    MachineNotFound = "MachineNotFound"
    MachineInvalid = "MachineInvalid"
    BootstrapDataMissing = "BootstrapDataMissing"
    # network
    NetworkConfigured = "NetworkConfigured"
    AddressConflict = "AddressConflict"
    GatewayUnreachable = "GatewayUnreachable"
    KernelFeatureMissing = "KernelFeatureMissing"
    InterfaceNotFound = "InterfaceNotFound"
    Drifted = "Drifted"
    DriftRepaired = "DriftRepaired"
    # IPAM
    PoolExhausted = "PoolExhausted"
    PoolNotFound = "PoolNotFound"
    AllocationFailed = "AllocationFailed"
    IPAMUnauthorized = "IPAMUnauthorized"
    IPAMUnavailable = "IPAMUnavailable"
    InvalidAllocation = "InvalidAllocation"
    # time
    TimeSynchronized = "TimeSynchronized"
    TimeSynchronizing = "TimeSynchronizing"
    TimeNotSynchronized = "TimeNotSynchronized"
    # join
    Joined = "Joined"
    TokenExpired = "TokenExpired"
    TokenInvalid = "TokenInvalid"
    CACertHashMismatch = "CACertHashMismatch"
    PreflightFailed = "PreflightFailed"
    NodeNameConflict = "NodeNameConflict"
    APIServerUnreachable = "APIServerUnreachable"
    APIServerUntrusted = "APIServerUntrusted"
    KubeletNotHealthy = "KubeletNotHealthy"
    JoinTimeout = "JoinTimeout"
    ControlPlaneNotReady = "ControlPlaneNotReady"
    # CNI
    CNIInstalled = "CNIInstalled"
    CNIBroken = "CNIBroken"
    KubeletReady = "KubeletReady"
    # lifecycle (the daemon, after the bootstrap)
    NodeReset = "NodeReset"
    AddressesReleased = "AddressesReleased"
    CNIConfigRemoved = "CNIConfigRemoved"
    CleanedUp = "CleanedUp"
    CredentialExpiring = "CredentialExpiring"
    Reconfigured = "Reconfigured"

    @property
    def info(self) -> ReasonInfo:
        return REASONS[self]


REASONS: dict[Reason, ReasonInfo] = {
    Reason.Bootstrapped: ReasonInfo(
        "Every phase completed and was verified.", "Nothing to do.", healthy=True),
    Reason.Completed: ReasonInfo(
        "A phase installed as a plugin completed and was verified (its condition's "
        "message says what it did).", "Nothing to do.", healthy=True),
    Reason.InProgress: ReasonInfo(
        "The phase is running now (on NodeBootstrapped: the message names the phase "
        "running and those done).", "Wait; `machine-agent status --wait` follows it.",
        healthy=True),
    Reason.Pending: ReasonInfo(
        "The phase has not started: an earlier phase has not completed.",
        "Look at the first phase that is not True.", healthy=True),
    Reason.Skipped: ReasonInfo(
        "The phase was left out by --skip/--only or by the configuration; on "
        "KubeadmReset: the node was not reset because KubeadmControlPlane's kcp-cleanup "
        "hook was on the Machine (KCP removes its etcd member with the kubelet working).",
        "Run it with `machine-agent run --only PHASE` when wanted; on KubeadmReset "
        "nothing: the infrastructure provider deletes the node.", healthy=True),
    Reason.UpToDate: ReasonInfo(
        "The phase completed earlier with the same inputs; nothing was applied.",
        "Nothing to do.", healthy=True),
    Reason.ConfigInvalid: ReasonInfo(
        "The AgentConfig has errors; each is listed with its path.",
        "Fix the named fields; check with `machine-agent config validate FILE`."),
    Reason.CloudInitNotFinished: ReasonInfo(
        "cloud-init runs on this boot but had not finished its init stage in time, so "
        "its instance data (a configuration source) was not read.",
        "Check `cloud-init status --long`; raise --cloud-init-wait if it is only slow."),
    Reason.StateUnwritable: ReasonInfo(
        "A file cannot be written (read-only or full): the state directory "
        "/var/lib/machine-agent or a file a phase writes, as the message names.",
        "Free space, or remount read-write the file system holding the path the message "
        "names; the journal is intact."),
    Reason.NotOnImage: ReasonInfo(
        "An image tree (`--root` without `--netns`) was asked for what only the running "
        "node has: a running service, its clock, its kernel or cluster membership, or a "
        "program the image lacks.",
        "Run the agent on the node, where it does this at first boot; or give --netns to "
        "change a test namespace from this host."),
    Reason.CommandFailed: ReasonInfo(
        "A command the phase runs exited non-zero.",
        "Read the command's output tail in the message or `machine-agent status`."),
    Reason.CommandTimeout: ReasonInfo(
        "A command did not finish within its time-out.",
        "Check what the command waits for; it is retried."),
    Reason.InternalError: ReasonInfo(
        "An unexpected error inside the agent.",
        "Report it with the log; the journal keeps the state for a retry."),
    Reason.ManagementUnreachable: ReasonInfo(
        "The management cluster's API cannot be reached.",
        "Check the route and firewall to the API endpoint; the agent retries."),
    Reason.ManagementUnauthorized: ReasonInfo(
        "The management cluster refused the agent's credentials (401).",
        "Give the node a valid token or kubeconfig; expired credentials are not retried."),
    Reason.ManagementForbidden: ReasonInfo(
        "The agent's identity lacks a permission (403).",
        "Apply templates/rbac/node-rbac.yaml (rendered for this node) to its identity."),
    Reason.MachineNotFound: ReasonInfo(
        "No Machine (or more than one) matches this node's identity.",
        "Set spec.identity.machine or label the Machine with this host's UUID."),
    Reason.MachineInvalid: ReasonInfo(
        "The Machine, its Cluster or its bootstrap data Secret has a field of the wrong "
        "type or shape; the message names the object and the field.",
        "Correct that field of the named object (`kubectl get -o yaml` shows it)."),
    Reason.BootstrapDataMissing: ReasonInfo(
        "The Machine's bootstrap data Secret (or its spec.bootstrap.dataSecretName) did not "
        "appear within spec.management.bootstrapWait; the message names the Secret.",
        "Check the bootstrap provider (CABPK: the Machine's KubeadmConfig and the "
        "controller's logs); the daemon tries again later, `machine-agent run` exits."),
    Reason.NetworkConfigured: ReasonInfo(
        "Interfaces, addresses, routes and DNS are applied and verified.", "Nothing to do.",
        healthy=True),
    Reason.AddressConflict: ReasonInfo(
        "Another host on the segment already answers for the address.",
        "Free the address or fix the IPAM record; the agent did not keep it."),
    Reason.GatewayUnreachable: ReasonInfo(
        "The gateway did not answer neighbour resolution; the change was rolled back.",
        "Check the gateway address, VLAN and cabling."),
    Reason.KernelFeatureMissing: ReasonInfo(
        "The kernel lacks a feature the configuration needs (e.g. 8021q, bonding).",
        "Use an image whose kernel has the named module."),
    Reason.InterfaceNotFound: ReasonInfo(
        "No interface (or more than one) matches an interface entry.",
        "Fix spec.network.interfaces[].match (name, macAddress or driver)."),
    Reason.Drifted: ReasonInfo(
        "Something the agent configured was changed by hand after it completed (an "
        "address, a route or a link: ConfigurationDrift False); spec.network.drift is "
        "report, so it was left as it is.",
        "Undo the change, run `machine-agent run` to repair it, or set "
        "spec.network.drift: repair."),
    Reason.DriftRepaired: ReasonInfo(
        "Something the agent configured was changed by hand, and the daemon applied the "
        "configuration again (spec.network.drift: repair).",
        "Nothing to do; find who changes the node by hand.", healthy=True),
    Reason.PoolExhausted: ReasonInfo(
        "The IPAM pool has no free address.", "Grow the pool or release stale addresses."),
    Reason.PoolNotFound: ReasonInfo(
        "The IPAM pool named in the configuration does not exist.",
        "Fix the pool reference or create the pool."),
    Reason.AllocationFailed: ReasonInfo(
        "The IPAM provider could not allocate an address for the claim (its Ready "
        "condition's reason AllocationFailed); its own message is quoted.",
        "Fix what the provider's message names (the pool's addresses, a conflicting "
        "IPAddress); the claim was deleted, the next run claims again."),
    Reason.IPAMUnauthorized: ReasonInfo(
        "The IPAM backend refused the agent's credentials.",
        "Give the agent a valid IPAM token."),
    Reason.IPAMUnavailable: ReasonInfo(
        "The IPAM backend did not answer; the agent retries with backoff.",
        "Check the backend; nothing is needed on the node."),
    Reason.InvalidAllocation: ReasonInfo(
        "The IPAM backend answered with an unusable address.",
        "Fix the pool's prefix or gateway in the backend named in the message."),
    Reason.TimeSynchronized: ReasonInfo(
        "The clock is synchronised within the allowed offset.", "Nothing to do.", healthy=True),
    Reason.TimeSynchronizing: ReasonInfo(
        "Waiting for the clock to synchronise; the message shows the offset.", "Wait.",
        healthy=True),
    Reason.TimeNotSynchronized: ReasonInfo(
        "The clock did not synchronise in time; join is held back.",
        "Check that the NTP servers named in the message are reachable."),
    Reason.Joined: ReasonInfo("The node joined the workload cluster.", "Nothing to do.",
        healthy=True),
    Reason.TokenExpired: ReasonInfo(
        "The bootstrap token is expired or unknown to the cluster.",
        "Let the bootstrap provider rotate the token; the agent re-reads the Secret."),
    Reason.TokenInvalid: ReasonInfo(
        "The bootstrap token is malformed or was rejected.",
        "Check the token in the bootstrap data."),
    Reason.CACertHashMismatch: ReasonInfo(
        "The cluster CA does not match the pinned hash.",
        "Fix discovery caCertHashes; never skip CA verification."),
    Reason.PreflightFailed: ReasonInfo(
        "Checks before kubeadm failed; each is listed with its fix.",
        "Fix each listed check."),
    Reason.NodeNameConflict: ReasonInfo(
        "A Node with this name already exists in the workload cluster.",
        "Delete the stale Node or give this node another name."),
    Reason.APIServerUnreachable: ReasonInfo(
        "The workload cluster's API server cannot be reached.",
        "Check controlPlaneEndpoint and the route to it."),
    Reason.APIServerUntrusted: ReasonInfo(
        "The workload cluster's API server answered with a certificate the node does not "
        "accept: not signed by the CA its kubeconfig holds (kubelet.conf, admin.conf: the "
        "pin is in the message; or the join's discovery file), not for the server's name, "
        "or outside its validity.",
        "Compare the pin with the cluster's CA (`<cluster>-ca` Secret; kubeadm's "
        "caCertHashes form): after the cluster's CA changed, `kubeadm reset -f` and join "
        "again; else fix the endpoint or the clock as the message says."),
    Reason.KubeletNotHealthy: ReasonInfo(
        "The kubelet did not become healthy after join, or did not register its Node "
        "on the workload cluster.",
        "Read `journalctl -u kubelet`; check the container runtime and that the Node name "
        "is the kubelet's --hostname-override."),
    Reason.JoinTimeout: ReasonInfo(
        "kubeadm join did not finish in time.", "Check the API server and kubelet."),
    Reason.ControlPlaneNotReady: ReasonInfo(
        "kubeadm cannot add this control plane: the cluster has no stable "
        "controlPlaneEndpoint, or the certificates every control plane shares are neither "
        "in the bootstrap data nor downloadable (the kubeadm-certs Secret expired, or the "
        "certificateKey does not decrypt it).",
        "KubeadmControlPlane puts the certificates in the bootstrap data: check its "
        "Secrets (<cluster>-ca, -etcd, -proxy, -sa); with certificateKey, upload the "
        "certificates again on a control plane (`kubeadm init phase upload-certs "
        "--upload-certs`) and give the new key."),
    Reason.CNIInstalled: ReasonInfo(
        "CNI plugins and configuration installed and proved with ADD/CHECK/DEL.",
        "Nothing to do.", healthy=True),
    Reason.CNIBroken: ReasonInfo(
        "The CNI check failed; the plugin's own error is in the message.",
        "Fix what the message names: spec.cni.conflist (template values or inline "
        "list), plugins missing from spec.cni.binDir (or spec.cni.plugins.source: bundle "
        "or url), or spec.cni.check.enabled: false for a plugin whose daemon is not "
        "running yet."),
    Reason.KubeletReady: ReasonInfo(
        "The Node is Ready on the workload cluster, as its kubelet reports it (condition "
        "WorkloadNodeReady, set once the Node's Ready condition is True).",
        "Nothing to do.", healthy=True),
    Reason.NodeReset: ReasonInfo(
        "The Machine is being deleted and `kubeadm reset -f` undid the join.",
        "Nothing to do; once every step ran the agent takes its pre-terminate hook off "
        "and CAPI deletes the Machine.", healthy=True),
    Reason.AddressesReleased: ReasonInfo(
        "The Machine is being deleted and the IPAM addresses this node claimed were "
        "given back.", "Nothing to do.", healthy=True),
    Reason.CNIConfigRemoved: ReasonInfo(
        "The Machine is being deleted and the CNI configuration list the agent wrote "
        "was removed.", "Nothing to do.", healthy=True),
    Reason.Reconfigured: ReasonInfo(
        "A changed AgentConfig (the Machine's ConfigMap or Secret) was planned and applied "
        "to the phases in spec.lifecycle.reconfigure; on a node that had not bootstrapped "
        "yet, the whole bootstrap ran again with it and completed.", "Nothing to do.",
        healthy=True),
    Reason.CredentialExpiring: ReasonInfo(
        "The node's management credential expires within 10 minutes and the token file "
        "holds no rotated one: the agent took its pre-terminate hook off while it still "
        "could, so that a deletion of the Machine is never held by a node that can no "
        "longer answer; its delete policy will not run.",
        "Rotate the credential (a projected service account token rotates itself; or "
        "write a new token into spec.management.tokenFile): the agent reads it again and "
        "puts the hook back on at its next check. Or accept that this node is not cleaned "
        "up on deletion."),
    Reason.CleanedUp: ReasonInfo(
        "Every step of spec.lifecycle.onDelete ran; the node no longer acts as this "
        "Machine.", "Nothing to do; reimage or reuse the host.", healthy=True),
}


class AgentError(Exception):
    """An error a user sees: what failed, why, and what to do.

    `temporary` errors are retried with jittered backoff; permanent ones stop the phase.
    """

    reason: Reason = Reason.InternalError
    temporary: bool = False
    retry_after: float | None = None
    """A delay the other side asked for (e.g. HTTP Retry-After); the retry helper honours it."""

    def __init__(
        self,
        message: str,
        *,
        reason: Reason | None = None,
        hint: str | None = None,
        temporary: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        if temporary is not None:
            self.temporary = temporary
        self.hint = hint if hint is not None else self.reason.info.fix

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class TemporaryError(AgentError):
    """Worth retrying: the world may change (a server comes back, a pool grows)."""

    temporary = True


class PermanentError(AgentError):
    """Not worth retrying without a change by a person."""

    temporary = False


@record(frozen=True)
class FieldError:
    """One validation problem, located by its path in the document."""

    path: str
    message: str
    hint: str | None = None
    origin: str | None = None

    def __str__(self) -> str:
        """One line: a key of the document (an interface's name, a unit's) may hold a
        newline or an escape sequence, printed escaped."""
        where = f"{self.origin}: " if self.origin else ""
        tail = f" ({self.hint})" if self.hint else ""
        return printable(f"{where}{self.path}: {self.message}{tail}")


MAX_LISTED = 50
"""Errors a ConfigError's message lists (all are in `errors`): a hostile document can hold
a million unknown keys."""


class ConfigError(PermanentError):
    """The configuration is invalid; carries every problem found, not just the first."""

    reason = Reason.ConfigInvalid

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        count = len(errors)
        lines = "\n".join(f"  {e}" for e in errors[:MAX_LISTED])
        if count > MAX_LISTED:
            lines += f"\n  ... and {count - MAX_LISTED} more"
        super().__init__(
            f"configuration has {count} error{'s' if count != 1 else ''}:\n{lines}",
            hint="",
        )


class CommandError(PermanentError):
    """A command exited non-zero; carries the tail of its output."""

    reason = Reason.CommandFailed


class CommandTimeoutError(TemporaryError):
    reason = Reason.CommandTimeout


class StateError(PermanentError):
    reason = Reason.StateUnwritable
