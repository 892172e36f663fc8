"""The delete policy on a node root, as the daemon runs it when its Machine is deleted:
the address the network phase claimed goes back to its pool, each step is a condition,
and a step that fails stops the policy with its reason; and when CAPI waits on the
agent's pre-terminate hook, as either API version shows it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from agent.config import load_config
from agent.config.sources import default_sources
from agent.daemon.deletion import (
    HOOK,
    DeletePolicy,
    DeleteRecord,
    hooked,
    kcp_holds,
    waiting_for_hook,
)
from agent.host import Host
from agent.ipam.base import ClaimRequest, PluginEnv, open_plugin
from agent.ipam.ledger import held, record
from agent.phases.base import Results
from agent.phases.cni.result import CNIResult
from agent.phases.join.result import JoinResult
from agent.report import Conditions
from agent.state import Journal

POOL = {"pools": {"nodes": {"addresses": ["192.0.2.10-192.0.2.20"], "prefix": 24,
                            "gateway": "192.0.2.1"}}}


def policy(tmp_path: Path, host: Host, journal: Journal, **on_delete: object) -> DeletePolicy:
    doc = {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
           "spec": {"ipam": {"plugins": {"static": POOL}},
                    "lifecycle": {"onDelete": on_delete}}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    config = load_config(host, default_sources([str(path)])).config
    published: list[bool] = []
    return DeletePolicy(host, config, journal, Conditions(host, []), published.append,
                        "uid-1", PluginEnv(host), Results())


def test_the_claimed_address_goes_back_to_its_pool(tmp_path: Path) -> None:
    host = Host(tmp_path / "root")
    journal = Journal.load(host)
    the_policy = policy(tmp_path, host, journal, kubeadmReset=False, removeCniConfig=False)
    request = ClaimRequest("uid-1/eth0/ipv4", "nodes", "ipv4", "eth0")
    plugin = open_plugin("static", {"static": POOL}, PluginEnv(host))
    record(journal, "static", request, plugin.claim(request))
    assert the_policy.run() is None
    released = the_policy.conditions.get("AddressesReleased")
    assert (released.status, released.reason) == ("True", "AddressesReleased")
    assert released.message == "released 192.0.2.10/24 of eth0 (static pool 'nodes')"
    assert held(Journal.load(host)) == []
    state = json.loads((tmp_path / "root/var/lib/machine-agent/ipam/static.json").read_text())
    assert "192.0.2.10" not in json.dumps(state)


def test_a_failed_reset_stops_the_policy_with_its_reason(tmp_path: Path) -> None:
    host = Host(tmp_path / "root", env={"PATH": str(tmp_path)})
    journal = Journal.load(host)
    the_policy = policy(tmp_path, host, journal)
    error = the_policy.run()
    assert error is not None and not error.temporary
    reset = the_policy.conditions.get("KubeadmReset")
    assert (reset.status, reset.reason) == ("False", "CommandFailed")
    assert "command not found: kubeadm" in reset.message
    summary = the_policy.conditions.get("NodeCleanedUp")
    assert summary.status == "False" and summary.message.startswith("KubeadmReset: ")
    assert summary.message.endswith(
        "the Machine is held until the service is restarted (tries again) or annotation "
        "pre-terminate.delete.hook.machine.cluster.x-k8s.io/machine-agent is removed "
        "(goes on without it)")
    assert journal.section(DeleteRecord) == DeleteRecord("uid-1", [], finished=False)


def cond(kind: str, status: str, reason: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason,
            "lastTransitionTime": "2026-01-01T00:00:00Z"}


DELETING = cond("Deleting", "True", "WaitingForPreTerminateHook")
V1BETA1 = cond("PreTerminateDeleteHookSucceeded", "False", "WaitingExternalHook")


def test_what_the_phases_proved_steers_the_reset_and_names_the_list_removed(
        tmp_path: Path) -> None:
    # a control plane by its journal alone (no etcd manifest any more): kubeadm's
    # remove-etcd-member phase stays KCP's; the CNI list is the one the cni phase wrote
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubeadm").write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/argv\n')
    (bin_dir / "kubeadm").chmod(0o755)
    host = Host(tmp_path / "root", env={"PATH": str(bin_dir)})
    conflist = "/etc/cni/net.d/10-mine.conflist"
    host.write_file(conflist, "{}")
    journal = Journal.load(host)
    the_policy = replace(policy(tmp_path, host, journal, releaseAddresses=False),
                         results=Results({"join": JoinResult(node="cp-1", control_plane=True),
                                          "cni": CNIResult(conflist=conflist)}))
    assert the_policy.run() is None
    assert (tmp_path / "argv").read_text() == "reset -f --skip-phases=remove-etcd-member\n"
    assert the_policy.conditions.get("CNIConfigRemoved").message == f"removed {conflist}"
    assert not host.exists(conflist)


@pytest.mark.parametrize(("status", "waiting"), [
    # read as v1beta2: its own conditions, and the v1beta1 ones kept under deprecated
    ({"conditions": [DELETING]}, True),
    ({"deprecated": {"v1beta1": {"conditions": [V1BETA1]}}}, True),
    # read as v1beta1: its own conditions, and the v1beta2 ones under status.v1beta2
    ({"conditions": [V1BETA1]}, True),
    ({"v1beta2": {"conditions": [DELETING]}}, True),
    # still draining, past the hooks, or not being deleted
    ({"conditions": [cond("Deleting", "True", "DrainingNode")]}, False),
    ({"conditions": [cond("PreTerminateDeleteHookSucceeded", "True", "")]}, False),
    ({"conditions": [cond("Deleting", "False", "NotDeleting")]}, False),
    ({}, False),
    # a Machine of a wrong shape is no wait
    ({"conditions": {"Deleting": "True"}}, False),
    ({"v1beta2": ["Deleting"], "deprecated": "v1beta1"}, False),
])
def test_capi_waiting_on_pre_terminate_hooks_is_read_in_either_api_version(
        status: dict[str, object], waiting: bool) -> None:
    assert waiting_for_hook({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
                             "status": status}) is waiting


@pytest.mark.parametrize(("metadata", "held"), [
    ({"annotations": {HOOK: "machine-agent"}}, True),
    ({"annotations": {HOOK: ""}}, True),  # the owner is optional in CAPI's contract
    ({"annotations": {"pre-terminate.delete.hook.machine.cluster.x-k8s.io/other": "x"}},
     False),
    ({"annotations": [HOOK]}, False),
    ({}, False),
    ("metadata", False),
])
def test_the_agents_hook_is_its_own_annotation(metadata: object, held: bool) -> None:
    assert hooked({"metadata": metadata}) is held


KCP = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/kcp-cleanup"


@pytest.mark.parametrize("version", ["v1.30.6", "v1.31.2", None])
@pytest.mark.parametrize("annotations", [{HOOK: "machine-agent", KCP: ""},
                                         {HOOK: "machine-agent"}])
def test_on_a_control_plane_the_agent_never_waits_for_kcps_hook(
        version: str | None, annotations: dict[str, str]) -> None:
    """KCP decides from its own spec.version (newer than an outdated Machine's in a
    rollout) and, from 1.31, waits for the agent's hook: a wait on kcp-cleanup could hold
    both for ever. KCP's hook on the Machine means: do not reset the node (kcp_holds)."""
    machine = {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z",
                            "labels": {"cluster.x-k8s.io/control-plane": ""},
                            "annotations": annotations},
               "spec": {"version": version} if version else {},
               "status": {"conditions": [DELETING]}}
    assert waiting_for_hook(machine) is True
    assert kcp_holds(machine) is (KCP in annotations)


def test_while_kcps_hook_is_on_the_machine_the_node_is_not_reset(tmp_path: Path) -> None:
    """An outdated control plane deleted by a KCP rollout: the agent's steps run at once,
    without kubeadm (KCP needs the kubelet and etcd until it removed the member)."""
    host = Host(tmp_path / "root")
    journal = Journal.load(host)
    pol = replace(policy(tmp_path, host, journal, releaseAddresses=False,
                         removeCniConfig=False), kcp_cleanup=True)
    assert pol.run() is None
    reset = pol.conditions.get("KubeadmReset")
    assert (reset.status, reset.reason) == ("True", "Skipped")
    assert KCP in reset.message and "not reset" in reset.message
    assert pol.conditions.get("NodeCleanedUp").status == "True"
    assert journal.section(DeleteRecord).finished
