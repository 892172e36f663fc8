"""kubeadm join/init failures mapped to condition reasons, by kubeadm's exit status and
its own messages.

Exit status first (cmd/kubeadm/app/util/error.go, checkErr): 3 (ValidationExitCode) is an
`Aggregate` of field errors, which kubeadm returns while loading and validating its
configuration, before any phase runs: the configuration is wrong (ConfigInvalid,
permanent, whatever the words). 2 (PreFlightExitCode) is a preflight error that reached
checkErr unwrapped (PreflightFailed). Errors of a phase are wrapped by the workflow runner
(app/cmd/phases/workflow/runner.go, "error execution phase %s") and exit 1, preflight
included; kubeadm from 1.33 (app/util/errors/errors.go, HandleError) exits 1 for every
error and prefixes "error: ". So 1 says nothing beyond "failed": the message decides.

Each pattern is kubeadm's wording, copied from its source (kubernetes/kubernetes,
cmd/kubeadm/...; the file is named beside each pattern). Order matters: the first match
wins, most specific first. What is temporary is retried with backoff; the rest stop.
"""

from __future__ import annotations

import re

from agent.errors import Reason
from agent.recordtype import record


@record(frozen=True)
class Classified:
    reason: Reason
    summary: str
    temporary: bool
    detail: str = ""
    """kubeadm's own line that decided it (or the failing checks for preflight)."""


_RULES: list[tuple[re.Pattern[str], Reason, str, bool]] = [
    # app/discovery/token/token.go, getClusterInfo: the cluster-info ConfigMap carries
    # no JWS signature for the token ID: the token expired or was deleted.
    (re.compile(r"could not find a JWS signature in the cluster-info ConfigMap for "
                r"token ID \"[^\"]*\""),
     Reason.TokenExpired, "the bootstrap token is expired or unknown to the cluster", False),
    # app/discovery/token/token.go, validateClusterInfoToken.
    (re.compile(r"token id \"[^\"]*\" is invalid for this cluster or it has expired"),
     Reason.TokenExpired, "the bootstrap token is expired or unknown to the cluster", False),
    # app/discovery/token/token.go, validateClusterInfoToken: the ID exists, the secret
    # half does not verify the signature.
    (re.compile(r"failed to verify JWS signature of received cluster info object, "
                r"can't trust this API Server"),
     Reason.TokenInvalid, "the bootstrap token was rejected (its secret does not match)",
     False),
    # app/util/pubkeypin/pubkeypin.go, CheckAny (wrapped in token.go validateClusterCA).
    (re.compile(r"none of the public keys \"[^\"]*\" are pinned"),
     Reason.CACertHashMismatch, "the cluster CA does not match the pinned caCertHashes",
     False),
    # app/discovery/token/token.go: pins that do not parse.
    (re.compile(r"invalid discovery token CA certificate hash"),
     Reason.CACertHashMismatch, "a caCertHashes entry is malformed", False),
    # app/cmd/phases/join/kubelet.go, runKubeletStartJoinPhase.
    (re.compile(r"a Node with name \"[^\"]*\" and status \"Ready\" already exists in the "
                r"cluster"),
     Reason.NodeNameConflict, "a Ready Node with this name already exists", False),
    # app/cmd/phases/join/preflight.go, notReadyToJoinControlPlaneTemp: no stable
    # controlPlaneEndpoint, or the shared certificates missing (SharedCertificateExists).
    (re.compile(r"One or more conditions for hosting a new control plane instance is not "
                r"satisfied"),
     Reason.ControlPlaneNotReady, "the cluster cannot take another control plane", False),
    # app/cmd/phases/join/controlplaneprepare.go, runDownloadCertsPhase
    # (app/phases/copycerts/copycerts.go DownloadCerts): the kubeadm-certs Secret is gone
    # (it lives two hours) or the certificateKey does not decrypt it.
    (re.compile(r"error downloading certs: "),
     Reason.ControlPlaneNotReady, "the control-plane certificates could not be downloaded",
     False),
    # app/preflight/checks.go, Error.Error: "[preflight] Some fatal errors occurred:".
    (re.compile(r"\[preflight\] Some fatal errors occurred"),
     Reason.PreflightFailed, "kubeadm's preflight failed", False),
    # The kubelet's health check, first by its failing HTTP call (the line with the
    # cause), then by the summary. 1.31+: app/util/apiclient/wait.go, WaitForKubelet
    # ("returned error: ..."; "[kubelet-check] The kubelet is not healthy after ...").
    # 1.30 and older: the same file's WaitForHealthyKubelet (run by WaitForKubeletAndFunc
    # from app/cmd/phases/join/kubelet.go), which prints "[kubelet-check] It seems like
    # the kubelet isn't running or healthy." and "... failed with error: ..." and ends
    # with "timed out waiting for the condition": ahead of JoinTimeout, and of the dial
    # rule below, which its "dial tcp 127.0.0.1:10248" would match.
    (re.compile(r"The HTTP call equal to 'curl -sSL http://(?:127\.0\.0\.1|localhost):10248"
                r"/healthz' (?:returned|failed with) "),
     Reason.KubeletNotHealthy, "the kubelet did not become healthy", True),
    (re.compile(r"The kubelet is not healthy after|It seems like the kubelet isn't running "
                r"or healthy"),
     Reason.KubeletNotHealthy, "the kubelet did not become healthy", True),
    # Go's crypto/x509 refusing the API server's certificate (file discovery verifies it
    # with the kubeconfig's CA, app/discovery/file/file.go; token discovery's second,
    # pinned fetch too): it answered, but is not the cluster the join trusts.
    (re.compile(r"x509: certificate signed by unknown authority|x509: certificate is "
                r"valid for |x509: certificate has expired or is not yet valid"),
     Reason.APIServerUntrusted, "the API server's certificate is not one the join trusts",
     False),
    # app/discovery/token/token.go, getClusterInfo: the API server did not answer (any
    # dial but the kubelet's own healthz port, 10248).
    (re.compile(r"failed to request the cluster-info ConfigMap|dial tcp (?!\S*:10248: )\S+: "
                r"(connect: connection refused|connect: no route to host|i/o timeout)"),
     Reason.APIServerUnreachable, "the API server could not be reached", True),
    # A field-error Aggregate of the configuration's validation
    # (app/apis/kubeadm/validation, apimachinery's field.Error: "<path>: <type>: <detail>",
    # several in "[..., ...]"), returned before any phase runs: before 1.33 it exits 3
    # (decided above), from 1.33 1 like every error, so its words decide. Anchored at the
    # line's start (after 1.33's "error: "): a phase's error starts "error execution
    # phase".
    (re.compile(r"^(?:error: )?\[?[A-Za-z][\w.\[\]-]*: (?:Invalid value|Required value|"
                r"Unsupported value|Duplicate value|Forbidden|Too long|Too many): ",
                re.MULTILINE),
     Reason.ConfigInvalid, "kubeadm refused its configuration (validation)", False),
    # app/util/config/common.go (validateSupportedVersion), strict decoding, or an
    # unregistered version: the JoinConfiguration itself is wrong.
    (re.compile(r"your configuration file uses an old API spec|strict decoding error|"
                r"no kind \"(?:Join|Init|Cluster)Configuration\" is registered"),
     Reason.ConfigInvalid, "kubeadm refused the JoinConfiguration", False),
    # k8s.io/apimachinery/pkg/util/wait (wait.go ErrWaitTimeout, "timed out waiting for
    # the condition", which kubeadm's polls return) and Go's context.DeadlineExceeded.
    (re.compile(r"timed out waiting for the condition|context deadline exceeded"),
     Reason.JoinTimeout, "kubeadm timed out", True),
]

_PREFLIGHT_LINE = re.compile(r"\[ERROR ([^\]]+)\]: (.*)")


PREFLIGHT_EXIT_CODE = 2
VALIDATION_EXIT_CODE = 3


def classify_output(output: str, exit_code: int | None = None) -> Classified:
    """The reason for a failed `kubeadm join` or `init`, from its exit status and its
    combined output."""
    if exit_code == VALIDATION_EXIT_CODE:
        return Classified(Reason.ConfigInvalid, "kubeadm refused its configuration (exit "
                          "status 3, validation)", False, last_line(output))
    if exit_code == PREFLIGHT_EXIT_CODE:
        failing = [f"{m.group(1)}: {m.group(2).strip()}"
                   for m in _PREFLIGHT_LINE.finditer(output)]
        return Classified(Reason.PreflightFailed, "kubeadm's preflight failed (exit status "
                          "2)", False, "; ".join(failing) or last_line(output))
    for pattern, reason, summary, temporary in _RULES:
        match = pattern.search(output)
        if match is None:
            continue
        if reason is Reason.PreflightFailed:
            failing = [f"{m.group(1)}: {m.group(2).strip()}"
                       for m in _PREFLIGHT_LINE.finditer(output)]
            return Classified(reason, summary, temporary, "; ".join(failing))
        lines = output.splitlines()
        at = next((i for i, ln in enumerate(lines) if match.group(0) in ln), None)
        line = lines[at].strip() if at is not None else match.group(0)
        if reason is Reason.ControlPlaneNotReady and line.endswith("satisfied."):
            # the cause is on the next line that says something (the template's {{.Error}})
            line = next((ln.strip() for ln in lines[(at or 0) + 1:] if ln.strip()), line)
        return Classified(reason, summary, temporary, line)
    return Classified(Reason.CommandFailed, "kubeadm join failed", False, last_line(output))


# cmd/kubeadm/app/util/error.go, checkErr: the hint kubeadm prints after every error.
STACK_HINT = "To see the stack trace of this error execute with --v=5 or higher"
# cmd/kubeadm/app/cmd/phases/workflow/runner.go: how a failed phase's error is wrapped.
# kubeadm 1.33+ prints "error: " before it (app/util/errors/errors.go, exitWithCode).
_PHASE_ERROR = re.compile(r"^(?:error: )?error execution phase .*")


def last_line(output: str) -> str:
    """kubeadm's own error: the last `error execution phase ...` line, else the last line
    that is not the stack-trace hint."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    phase = [ln for ln in lines if _PHASE_ERROR.match(ln)]
    if phase:
        return phase[-1]
    return next((ln for ln in reversed(lines) if ln != STACK_HINT), "")

