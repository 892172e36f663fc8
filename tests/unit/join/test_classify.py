"""kubeadm's own failure messages (as printed by kubeadm, seen in the field) map to reasons."""

from __future__ import annotations

import pytest

from agent.errors import Reason
from agent.phases.join.classify import classify_output

STACK = "To see the stack trace of this error execute with --v=5 or higher"
PREFIX = ("error execution phase preflight: couldn't validate the identity of the API "
          "Server: ")


@pytest.mark.parametrize(("output", "reason", "temporary"), [
    (PREFIX + 'could not find a JWS signature in the cluster-info ConfigMap for token ID '
              '"7l7l2c"', Reason.TokenExpired, False),
    (PREFIX + 'token id "7l7l2c" is invalid for this cluster or it has expired. Use '
              '"kubeadm token create" on the control-plane node to create a new valid token',
     Reason.TokenExpired, False),
    (PREFIX + "failed to verify JWS signature of received cluster info object, can't trust "
              "this API Server", Reason.TokenInvalid, False),
    (PREFIX + 'cluster CA found in cluster-info ConfigMap is invalid: none of the public keys '
              '"sha256:0a1b" are pinned', Reason.CACertHashMismatch, False),
    ('error execution phase kubelet-start: a Node with name "worker-0" and status "Ready" '
     'already exists in the cluster. You must delete the existing Node or change the name '
     'of this new joining Node', Reason.NodeNameConflict, False),
    ("[kubelet-check] The kubelet is not healthy after 4m0.000580205s",
     Reason.KubeletNotHealthy, True),
    (PREFIX + 'failed to request the cluster-info ConfigMap: Get "https://192.0.2.1:6443/api/'
              'v1/namespaces/kube-public/configmaps/cluster-info?timeout=10s": dial tcp '
              '192.0.2.1:6443: connect: no route to host', Reason.APIServerUnreachable, True),
    ("error execution phase kubelet-start: timed out waiting for the condition",
     Reason.JoinTimeout, True),
    ("something kubeadm never said", Reason.CommandFailed, False),
])
def test_kubeadm_messages_map_to_reasons(output: str, reason: Reason, temporary: bool) -> None:
    found = classify_output(output)
    assert (found.reason, found.temporary) == (reason, temporary)


def test_preflight_failure_names_every_failing_check() -> None:
    output = ("error execution phase preflight: [preflight] Some fatal errors occurred:\n"
              "\t[ERROR FileAvailable--etc-kubernetes-kubelet.conf]: /etc/kubernetes/"
              "kubelet.conf already exists\n"
              "\t[ERROR Swap]: running with swap on is not supported. Please disable swap\n"
              "[preflight] If you know what you are doing, you can make a check non-fatal "
              "with `--ignore-preflight-errors=...`")
    found = classify_output(output)
    assert found.reason is Reason.PreflightFailed
    assert found.detail == ("FileAvailable--etc-kubernetes-kubelet.conf: /etc/kubernetes/"
                            "kubelet.conf already exists; Swap: running with swap on is not "
                            "supported. Please disable swap")


# kubeadm 1.30 and older (app/util/apiclient/wait.go WaitForHealthyKubelet, the join's
# kubeadmJoinFailMsg), as the stand-in prints it for those versions.
OLD_KUBELET_UNHEALTHY = (
    "[kubelet-start] Waiting for the kubelet to perform the TLS Bootstrap...\n"
    "[kubelet-check] Initial timeout of 40s passed.\n"
    "[kubelet-check] It seems like the kubelet isn't running or healthy.\n"
    "[kubelet-check] The HTTP call equal to 'curl -sSL http://localhost:10248/healthz' failed "
    "with error: Get \"http://localhost:10248/healthz\": dial tcp 127.0.0.1:10248: connect: "
    "connection refused.\n\n"
    "Unfortunately, an error has occurred:\n\ttimed out waiting for the condition\n\n"
    "This error is likely caused by:\n\t- The kubelet is not running\n"
    "error execution phase kubelet-start: timed out waiting for the condition\n"
    "To see the stack trace of this error execute with --v=5 or higher")


def test_an_unhealthy_kubelet_in_the_wording_of_kubeadm_before_1_31() -> None:
    found = classify_output(OLD_KUBELET_UNHEALTHY)
    assert (found.reason, found.temporary) == (Reason.KubeletNotHealthy, True)
    assert found.detail.startswith("[kubelet-check] The HTTP call equal to 'curl -sSL "
                                   "http://localhost:10248/healthz' failed with error")


@pytest.mark.parametrize("address", ["127.0.0.1:10248", "[::1]:10248"])
def test_a_refused_dial_to_the_kubelets_port_is_not_the_api_server(address: str) -> None:
    found = classify_output(f'Get "http://localhost:10248/healthz": dial tcp {address}: '
                            "connect: connection refused")
    assert found.reason is not Reason.APIServerUnreachable
    api = classify_output("dial tcp [2001:db8::1]:6443: connect: connection refused")
    assert api.reason is Reason.APIServerUnreachable


@pytest.mark.parametrize(("output", "detail"), [
    ("[preflight] Running pre-flight checks\n[kubelet-start] Starting the kubelet\n"
     "error execution phase kubelet-start: open /var/lib/kubelet/config.yaml: read-only file "
     "system\nTo see the stack trace of this error execute with --v=5 or higher\n",
     "error execution phase kubelet-start: open /var/lib/kubelet/config.yaml: read-only file "
     "system"),
    ("unknown flag: --bogus\nTo see the stack trace of this error execute with --v=5 or "
     "higher", "unknown flag: --bogus"),
])
def test_an_unclassified_failure_names_kubeadms_error_line(output: str, detail: str) -> None:
    found = classify_output(output)
    assert (found.reason, found.detail) == (Reason.CommandFailed, detail)


@pytest.mark.parametrize(("code", "reason"), [(3, Reason.ConfigInvalid),
                                              (2, Reason.PreflightFailed)])
def test_kubeadms_exit_status_decides_before_its_words(code: int, reason: Reason) -> None:
    """cmd/kubeadm/app/util/error.go checkErr: ValidationExitCode 3, PreFlightExitCode 2;
    the words of the message would say something else (a time-out)."""
    found = classify_output("timed out waiting for the condition", code)
    assert (found.reason, found.temporary) == (reason, False)


def test_exit_status_1_leaves_it_to_the_message_and_the_error_prefix_of_new_kubeadm() -> None:
    """kubeadm 1.33+ (app/util/errors/errors.go exitWithCode) prints "error: " first."""
    output = ("[preflight] Running pre-flight checks\nerror: error execution phase "
              "kubelet-start: something new\nTo see the stack trace of this error execute "
              "with --v=5 or higher")
    found = classify_output(output, 1)
    assert found.reason is Reason.CommandFailed
    assert found.detail == "error: error execution phase kubelet-start: something new"


@pytest.mark.parametrize("output", [
    # kubeadm 1.33+: exit status 1 and "error: " for a validation Aggregate too
    'error: discovery: Invalid value: "": bootstrapToken or file must be set\n' + STACK,
    'error: [bootstrapTokens[0].token: Invalid value: "": the bootstrap token is invalid, '
    'controlPlaneEndpoint: Invalid value: "a b": must be a valid host or host:port]\n'
    + STACK,
    'error: nodeRegistration.name: Required value: name is required\n' + STACK,
])
def test_a_validation_error_of_kubeadm_1_33_is_config_invalid_by_its_words(
        output: str) -> None:
    found = classify_output(output, 1)
    assert (found.reason, found.temporary) == (Reason.ConfigInvalid, False)
    assert found.detail == output.splitlines()[0]


def test_a_phase_error_naming_a_field_is_not_a_validation_error() -> None:
    found = classify_output("error: error execution phase kubelet-start: node: Forbidden: "
                            "something\n" + STACK, 1)
    assert found.reason is Reason.CommandFailed
