"""Join: the bootstrap data usable, the node's state (joined, clean or half-joined), and
the join phase's own preflight — every check with its result, warnings for the ones the
configuration ignores."""

from __future__ import annotations

from collections.abc import Iterator

from agent.errors import AgentError
from agent.kube.workload import KUBELET_CONF
from agent.phases.base import Phase
from agent.phases.checks import Check, Doctor, from_last_run, not_checked
from agent.phases.join.managed import node_state
from agent.phases.join.preflight import PreflightInputs, is_ignored, preflight_results
from agent.phases.join.source import UNSOURCED_HINT, resolve, unsourced

PHASE = "join"


def checks(phase: Phase, doctor: Doctor) -> Iterator[Check]:
    config = doctor.config
    if config is None:
        return
    spec = config.spec.join
    if (why := unsourced(config, doctor.machine.facts if doctor.machine else None)) and \
            not doctor.management_problem:
        yield Check(PHASE, "source", "warn", why, UNSOURCED_HINT)
        return
    try:
        source = resolve(config, doctor.machine.facts if doctor.machine else None,
                         doctor.host)
    except AgentError as err:
        if doctor.management_problem and doctor.machine is None and spec.source != "config":
            yield not_checked(PHASE, "source", f"the bootstrap data comes from the Machine "
                              f"and {doctor.management_problem}")
        else:
            yield Check(PHASE, "source", "fail", err.message, err.hint or "")
        return
    yield Check(PHASE, "source", "pass",
                f"{source.facts.api_version} JoinConfiguration from {source.origin}, "
                f"Node {source.target.node_name}, Kubernetes {source.version}")
    state = node_state(doctor.host, source.target.expected_server,
                       brought=source.target.brought)
    server = source.target.expected_server or "the cluster"
    if state == "joined":
        yield Check(PHASE, "node", "pass", f"joined: {KUBELET_CONF} points at {server}")
        return  # preflight is for a node that has not joined; a joined one fails it
    yield Check(PHASE, "node", "pass" if state == "clean" else "warn",
                "not joined yet, nothing from an earlier attempt" if state == "clean" else
                "half-joined: files of an earlier kubeadm join are present",
                "" if state == "clean" else
                "nothing: the agent runs `kubeadm reset -f` before its next attempt")
    last = doctor.last_failure(PHASE)
    if last is not None:
        # Discovery (the CA pin, the token) and kubelet-start (the Node name) are decided
        # by the workload cluster during `kubeadm join`, which doctor does not run.
        yield from_last_run(PHASE, "kubeadm-join", last, "discovery and kubelet-start are "
                            "decided by the workload cluster during `kubeadm join`")
    ignored = frozenset(n.lower() for n in (*source.facts.ignore_preflight_errors,
                                             *source.target.ignore_preflight_errors,
                                             *spec.node_registration.ignore_preflight_errors))
    inputs = PreflightInputs(
        version=source.version, cri_socket=source.facts.cri_socket,
        api_server_endpoint=source.facts.api_server_endpoint, kubeadm=spec.kubeadm_path,
        kubelet=spec.kubelet_path, dual_stack=spec.dual_stack,
        br_netfilter=spec.require_br_netfilter, ignored=ignored,
        api_timeout=min(float(spec.api_check_timeout), 5.0),
        time_gate=None)  # the time area checks the clock itself
    for name, failures in preflight_results(doctor.host, inputs):
        if not failures:
            yield Check(PHASE, name, "pass", "ok")
        for failure in failures:
            ignored_here = is_ignored(failure, ignored)
            yield Check(PHASE, name, "warn" if ignored_here else "fail",
                        failure.problem + (" (ignored by ignorePreflightErrors)"
                                           if ignored_here else ""), failure.fix,
                        {"check": failure.check})
