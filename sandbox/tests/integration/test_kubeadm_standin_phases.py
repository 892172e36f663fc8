"""The kubeadm stand-in, phase by phase, held to kubeadm's source (kubernetes/kubernetes,
cmd/kubeadm/...): each test names the file and function it follows. The stand-in is run
as the agent runs kubeadm, from PATH, against a node root and a shared cluster world."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from machine_agent_sandbox.testkit.bootstrap import (
    certificate_files,
    init_configuration,
    join_configuration,
)
from machine_agent_sandbox.testkit.node import ca_pin, joinable_cluster

from agent.phases.join.classify import classify_output
from tests.integration.join.conftest import Node, NoSleep

TOKEN = "abcdef.0123456789abcdef"


@pytest.fixture
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, Node]]:
    from agent.host import Host

    base = tmp_path_factory.mktemp("k")
    with joinable_cluster(base, ("cp-0", "cp-1")) as (world, nodes):
        out = []
        for node in nodes.values():
            clock = NoSleep()
            host = Host(node.root, clock=clock, env={"PATH": f"{node.path}:/usr/bin:/bin"})
            out.append(Node(node.root, host, world.world_path, world.endpoint, clock,
                            world.api))
        yield out[0], out[1]


def write_certificates(node: Node) -> None:
    for f in certificate_files():
        node.host.write_file(f.path, f.content)


def kubeadm_init(node: Node, version: str = "v1beta4") -> list[str]:
    write_certificates(node)
    node.host.write_file("/run/kubeadm/kubeadm.yaml",
                         init_configuration(node.endpoint, "cp-0", TOKEN, version))
    return ["kubeadm", "init", "--config", "/run/kubeadm/kubeadm.yaml"]


def kubeadm_join_control_plane(node: Node) -> list[str]:
    write_certificates(node)
    node.host.write_file("/run/kubeadm/join.yaml", join_configuration(
        node.endpoint, "cp-1", TOKEN, ca_pin(node.api), control_plane=True))
    return ["kubeadm", "join", "--config", "/run/kubeadm/join.yaml"]


def test_init_keeps_the_ca_of_the_bootstrap_data_and_writes_a_control_planes_files(
        pair: tuple[Node, Node]) -> None:
    """app/cmd/phases/init/certs.go runCAPhase (an existing CA is used, "Using existing
    ca certificate authority"), kubeconfig.go, controlplane.go, etcd.go (the static Pod
    manifests), bootstraptoken.go (the InitConfiguration's tokens made known)."""
    first, _ = pair
    result = first.host.run(kubeadm_init(first), check=False)
    assert result.ok, result.stderr
    assert "[certs] Using existing ca certificate authority" in result.stdout
    assert "\nca\n" in first.file("/etc/kubernetes/pki/ca.crt").read_text()
    for name in ("admin.conf", "super-admin.conf", "kubelet.conf", "controller-manager.conf",
                 "scheduler.conf", "manifests/etcd.yaml", "manifests/kube-apiserver.yaml",
                 "manifests/kube-controller-manager.yaml", "manifests/kube-scheduler.yaml"):
        assert first.file(f"/etc/kubernetes/{name}").exists(), name
    world = first.world
    assert world["tokens"] == {"abcdef": "0123456789abcdef"}
    assert world["etcdMembers"] == ["cp-0"]
    assert world["clusterConfiguration"]["controlPlaneEndpoint"] == first.endpoint


def test_init_preflight_refuses_existing_static_pod_manifests(pair: tuple[Node, Node]) -> None:
    """app/preflight/checks.go RunInitNodeChecks: FileAvailableCheck for each manifest;
    Error.Error's wording; wrapped by the workflow runner, so exit status 1."""
    first, _ = pair
    argv = kubeadm_init(first)
    first.host.write_file("/etc/kubernetes/manifests/kube-apiserver.yaml", "old\n")
    result = first.host.run(argv, check=False)
    assert result.returncode == 1
    assert ("[ERROR FileAvailable--etc-kubernetes-manifests-kube-apiserver.yaml]: "
            "/etc/kubernetes/manifests/kube-apiserver.yaml already exists") in result.stderr
    assert classify_output(result.stderr, result.returncode).reason == "PreflightFailed"


def test_a_validation_error_exits_3_and_is_classified_by_its_exit_status(
        pair: tuple[Node, Node]) -> None:
    """app/util/error.go checkErr: a field-error Aggregate (validation, before any phase
    runs: app/apis/kubeadm/validation ValidateInitConfiguration) exits with
    ValidationExitCode 3."""
    first, _ = pair
    argv = kubeadm_init(first)
    first.host.write_file("/run/kubeadm/kubeadm.yaml", init_configuration(
        first.endpoint, "cp-0", "not-a-token", "v1beta4"))
    result = first.host.run(argv, check=False)
    assert result.returncode == 3, result.stderr
    found = classify_output(result.stderr, result.returncode)
    assert (found.reason, found.temporary) == ("ConfigInvalid", False)
    assert "bootstrapTokens[0].token: Invalid value" in found.detail


def test_kubeadm_1_33_exits_1_for_a_validation_error_and_it_is_still_config_invalid(
        pair: tuple[Node, Node]) -> None:
    """app/util/errors/errors.go (1.33+) HandleError/exitWithCode: every error exits 1,
    printed after "error: "; the agent reads the words, not the code."""
    first, _ = pair
    first.set_world(version="v1.33.1")
    argv = kubeadm_init(first)
    first.host.write_file("/run/kubeadm/kubeadm.yaml", init_configuration(
        first.endpoint, "cp-0", "not-a-token", "v1beta4"))
    result = first.host.run(argv, check=False)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error: [bootstrapTokens[0].token: Invalid value")
    found = classify_output(result.stderr, result.returncode)
    assert (found.reason, found.temporary) == ("ConfigInvalid", False)


def test_control_plane_join_adds_an_etcd_member_and_reset_removes_it_unless_skipped(
        pair: tuple[Node, Node]) -> None:
    """app/cmd/phases/join/controlplanejoin.go runEtcdPhase (the member added to the
    stacked etcd); app/cmd/phases/reset/removeetcdmember.go (reset removes it) and the
    workflow runner's --skip-phases (app/cmd/phases/workflow/runner.go)."""
    first, second = pair
    assert first.host.run(kubeadm_init(first)).ok
    joined = second.host.run(kubeadm_join_control_plane(second), check=False)
    assert joined.ok, joined.stderr
    assert "[etcd] Announced new etcd member joining to the existing etcd cluster" in \
        joined.stdout
    assert first.world["etcdMembers"] == ["cp-0", "cp-1"]
    skipped = second.host.run(["kubeadm", "reset", "-f", "--skip-phases=remove-etcd-member"])
    assert skipped.ok and first.world["etcdMembers"] == ["cp-0", "cp-1"]
    # cleanup-node empties the manifests directory and keeps it (CleanDir)
    assert second.clean() and not any(second.file("/etc/kubernetes/manifests").iterdir())
    second.set_world(readyNodes=["cp-0"])  # its kubelet stopped: the Node went NotReady
    assert second.host.run(kubeadm_join_control_plane(second)).ok
    assert second.host.run(["kubeadm", "reset", "-f"]).ok
    assert first.world["etcdMembers"] == ["cp-0"]


def test_control_plane_join_without_a_stable_endpoint_is_refused(
        pair: tuple[Node, Node]) -> None:
    """app/cmd/phases/join/preflight.go checkIfReadyForAdditionalControlPlane and
    notReadyToJoinControlPlaneTemp."""
    _, second = pair
    second.set_world(tokens={"abcdef": "0123456789abcdef"})  # a cluster made without one
    result = second.host.run(kubeadm_join_control_plane(second), check=False)
    assert result.returncode == 1
    assert ("unable to add a new control plane instance a cluster that doesn't have a "
            "stable controlPlaneEndpoint address") in result.stderr
    found = classify_output(result.stderr, result.returncode)
    assert found.reason == "ControlPlaneNotReady"
    assert found.detail.startswith("unable to add a new control plane instance")


def test_worker_kubelet_start_writes_the_ca_only_where_there_is_none(
        pair: tuple[Node, Node]) -> None:
    """app/cmd/phases/join/kubelet.go runKubeletStartJoinPhase: the cluster CA from
    cluster-info is written to /etc/kubernetes/pki/ca.crt only when the file is missing
    (a control plane's comes with the bootstrap data and is kept)."""
    first, second = pair
    assert first.host.run(kubeadm_init(first)).ok
    assert second.host.run(kubeadm_join_control_plane(second)).ok
    assert "\nca\n" in second.file("/etc/kubernetes/pki/ca.crt").read_text()


def test_token_discovery_reads_cluster_info_checks_its_jws_signature_and_the_ca_pin(
        pair: tuple[Node, Node]) -> None:
    """app/discovery/token/token.go retrieveValidatedConfigInfo: cluster-info read
    anonymously, validateClusterInfoToken (the token's JWS signature: present only for a
    known token, made with its secret), validateClusterCA (the pin of the CA in its
    kubeconfig, app/util/pubkeypin), then read again over TLS verified with that CA."""
    import requests

    from agent.phases.join.token import _signed

    first, second = pair
    assert first.host.run(kubeadm_init(first)).ok  # its token is now known, signed
    info = requests.get(f"https://{first.endpoint}/api/v1/namespaces/kube-public/"
                        "configmaps/cluster-info", verify=str(first.api.ca_path),
                        timeout=10).json()  # anonymous, as kubeadm reads it
    assert sorted(info["data"]) == ["jws-kubeconfig-abcdef", "kubeconfig"]
    # the agent's own doctor check agrees with the signature the cluster made
    assert _signed(info["data"]["jws-kubeconfig-abcdef"], info["data"]["kubeconfig"],
                   "0123456789abcdef")

    def join_with(token: str, pin: str) -> str:
        second.host.write_file("/run/kubeadm/join.yaml", join_configuration(
            second.endpoint, "worker-0", token, pin))
        result = second.host.run(["kubeadm", "join", "--config", "/run/kubeadm/join.yaml"],
                                 check=False)
        assert not result.ok
        return result.stderr.splitlines()[0]

    prefix = ("error execution phase preflight: couldn't validate the identity of the API "
              "Server: ")
    pin = ca_pin(second.api)
    assert join_with("zzzzzz.0123456789abcdef", pin) == (
        prefix + 'could not find a JWS signature in the cluster-info ConfigMap for token '
                 'ID "zzzzzz"')
    assert join_with("abcdef.0123456789zzzzzz", pin) == (
        prefix + "failed to verify JWS signature of received cluster info object, can't "
                 "trust this API Server")
    assert join_with(TOKEN, "sha256:" + "00" * 32) == (
        prefix + f'cluster CA found in cluster-info ConfigMap is invalid: none of the public '
                 f'keys "{pin}" are pinned')


def test_kubelet_start_bootstraps_the_kubelets_own_credential_and_removes_the_bootstrap_one(
        pair: tuple[Node, Node]) -> None:
    """app/cmd/phases/join/kubelet.go runKubeletStartJoinPhase: bootstrap-kubelet.conf
    for the TLS bootstrap, removed once the kubelet has its own kubelet.conf (mode 0600,
    app/util/kubeconfig WriteToDisk), whose credential the cluster issued to
    system:node:<name>, with which the kubelet registers its Node."""
    first, second = pair
    assert first.host.run(kubeadm_init(first)).ok
    second.host.write_file("/run/kubeadm/join.yaml", join_configuration(
        second.endpoint, "worker-0", TOKEN, ca_pin(second.api)))
    assert second.host.run(["kubeadm", "join", "--config", "/run/kubeadm/join.yaml"]).ok
    assert not second.file("/etc/kubernetes/bootstrap-kubelet.conf").exists()
    conf = second.file("/etc/kubernetes/kubelet.conf")
    assert conf.stat().st_mode & 0o777 == 0o600
    node = second.registered("worker-0")
    assert node is not None and node["metadata"]["name"] == "worker-0"
