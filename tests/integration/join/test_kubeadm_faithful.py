"""The kubeadm stand-in is no kinder than kubeadm where the agent can tell (each case
names the kubeadm source it follows), and the agent reports what kubeadm does."""

from __future__ import annotations

import yaml
from machine_agent_sandbox.testkit.bootstrap import CA_HASH, cloud_config

from tests.integration.join.conftest import Node, machine_facts

PINS = f"    caCertHashes:\n    - {CA_HASH}\n"


def with_join_configuration(data: str, old: str, new: str) -> str:
    """The bootstrap data with `old` replaced by `new` in its JoinConfiguration."""
    header, _, body = data.partition("#cloud-config\n")
    doc = yaml.safe_load(body)
    join = doc["write_files"][0]
    assert old in join["content"]
    join["content"] = join["content"].replace(old, new)
    return header + "#cloud-config\n" + yaml.safe_dump(doc, sort_keys=False, width=10000)


def test_token_discovery_without_ca_pins_is_refused_unless_verification_is_skipped(
        node: Node) -> None:
    """app/apis/kubeadm/validation/validation.go ValidateDiscoveryBootstrapToken."""
    unpinned = with_join_configuration(cloud_config(node.endpoint), PINS, "")
    result, machine = node.run(node.configure({"maxAttempts": 1}), machine_facts(unpinned))
    joined = machine.conditions["NodeJoined"]
    assert not result.ok
    assert (joined.status, joined.reason) == ("False", "ConfigInvalid")
    assert "discovery.bootstrapToken.caCertHashes: Invalid value" in joined.message
    assert "unsafeSkipCAVerification" in joined.message
    assert node.world.get("joins") is None and node.clean()

    skipped = with_join_configuration(cloud_config(node.endpoint), PINS,
                                      "    unsafeSkipCAVerification: true\n")
    result, machine = node.run(node.configure({}), machine_facts(skipped))
    assert result.ok, machine.conditions["NodeJoined"].message
    assert node.world["joins"] == ["worker-0"]


def test_a_worker_joins_with_a_static_pod_of_its_own_as_kubeadm_since_1_23_allows(
        node: Node) -> None:
    """kubernetes/kubernetes#104942 (1.23) took DirAvailable--etc-kubernetes-manifests out
    of the join's preflight (app/preflight/checks.go JoinNodeChecks)."""
    node.host.write_file("/etc/kubernetes/manifests/kube-vip.yaml", "kind: Pod\n")
    result, machine = node.run(node.configure({}), machine_facts(cloud_config(node.endpoint)))
    assert result.ok, machine.conditions["NodeJoined"].message


def test_kubeadm_1_22_refuses_a_join_onto_a_non_empty_manifests_directory(node: Node) -> None:
    """app/preflight/checks.go RunJoinNodeChecks up to 1.22: DirAvailableCheck."""
    node.set_world(version="v1.22.17")
    node.host.write_file("/etc/kubernetes/manifests/kube-vip.yaml", "kind: Pod\n")
    data = cloud_config(node.endpoint, version="v1beta3")
    _, machine = node.run(node.configure({"maxAttempts": 1}),
                          machine_facts(data, version="v1.22.17"))
    joined = machine.conditions["NodeJoined"]
    assert (joined.status, joined.reason) == ("False", "PreflightFailed"), joined.message
    assert ("DirAvailable--etc-kubernetes-manifests: /etc/kubernetes/manifests is not empty"
            in joined.message)


def test_reset_stops_the_kubelet_and_empties_its_directory(node: Node) -> None:
    """app/cmd/phases/reset/cleanupnode.go runCleanupNode: `systemctl stop kubelet`, the
    contents of /var/lib/kubelet (what preKubeadmCommands put there too), the manifests
    and the PKI deleted, the directories kept; the kubeconfig files deleted."""
    from machine_agent_sandbox.kubeadm import kubelet

    result, _ = node.run(node.configure({}), machine_facts(cloud_config(node.endpoint)))
    assert result.ok and kubelet.running(node.root)
    node.host.write_file("/var/lib/kubelet/credential-provider.yaml", "kind: X\n")
    node.host.write_file("/var/lib/kubelet/pki/kubelet.crt", "cert\n")
    reset = node.host.run(["kubeadm", "reset", "-f"], check=False)
    assert reset.ok, reset.stderr
    assert "[reset] Stopping the kubelet service" in reset.stdout
    assert not kubelet.running(node.root)
    assert node.file("/var/lib/kubelet").is_dir()
    assert list(node.file("/var/lib/kubelet").iterdir()) == []
    assert not node.file("/etc/kubernetes/kubelet.conf").exists() and node.clean()


def test_a_configuration_without_a_node_name_joins_under_the_nodes_own_host_name(
        node: Node) -> None:
    """CAPI's own Ignition template names no node: kubeadm takes the host name, trimmed
    and lowercased (cmd/kubeadm/app/util GetHostname), and the agent waits for that Node,
    not one named after the Machine."""
    node.host.write_file("/proc/sys/kernel/hostname", "Node-7.Example.NET\n")
    data = with_join_configuration(cloud_config(node.endpoint),
                                   "  name: '{{ ds.meta_data.local_hostname }}'\n", "")
    result, machine = node.run(node.configure({"registrationTimeout": "5s"}),
                               machine_facts(data))
    joined = machine.conditions["NodeJoined"]
    assert result.ok, joined.message
    assert joined.message.endswith("; Node node-7.example.net registered")
    assert node.world["joins"] == ["node-7.example.net"]
    assert node.registered("node-7.example.net") is not None
    assert node.registered("worker-0") is None
    # the node's name is its host name: no --hostname-override (app/phases/kubelet/flags.go)
    assert node.file("/var/lib/kubelet/kubeadm-flags.env").read_text() == \
        'KUBELET_KUBEADM_ARGS="--node-ip=192.0.2.20"\n'


def test_a_node_named_otherwise_than_its_host_runs_the_kubelet_with_an_override(
        node: Node) -> None:
    node.host.write_file("/proc/sys/kernel/hostname", "host-a\n")
    result, machine = node.run(node.configure({}), machine_facts(cloud_config(node.endpoint)))
    assert result.ok, machine.conditions["NodeJoined"].message
    assert node.file("/var/lib/kubelet/kubeadm-flags.env").read_text() == \
        'KUBELET_KUBEADM_ARGS="--hostname-override=worker-0 --node-ip=192.0.2.20"\n'
    assert node.registered("worker-0") is not None and node.registered("host-a") is None


def test_the_kubelets_tls_bootstrap_ends_in_a_client_certificate_the_agent_reads_with(
        node: Node) -> None:
    """The real kubelet's TLS bootstrap (pkg/kubelet/certificate/bootstrap) leaves
    kubelet.conf naming /var/lib/kubelet/pki/kubelet-client-current.pem as its client
    certificate and key, no token: the agent finds the Node with that certificate, and
    the cluster sees it as the node (system:node:<name>, group system:nodes)."""
    import requests
    import yaml

    from agent.errors import Reason
    from agent.kube.workload import KUBELET_CONF, KubeconfigCluster

    result, machine = node.run(node.configure({}), machine_facts(cloud_config(node.endpoint)))
    assert result.ok, machine.conditions["NodeJoined"].message
    user = yaml.safe_load(node.file(KUBELET_CONF).read_text())["users"][0]["user"]
    pem = "/var/lib/kubelet/pki/kubelet-client-current.pem"
    assert user == {"client-certificate": pem, "client-key": pem}
    assert node.file(pem).is_symlink() and node.file(pem).stat().st_mode & 0o777 == 0o600
    cluster = KubeconfigCluster(node.host, KUBELET_CONF, reason=Reason.KubeletNotHealthy,
                                missing_hint="join")
    assert cluster.cert == (str(node.file(pem)), str(node.file(pem)))
    assert "Authorization" not in cluster.headers
    found = cluster.node("worker-0")
    assert found is not None and found["metadata"]["name"] == "worker-0"
    review = requests.post(
        f"{node.api.url}/apis/authentication.k8s.io/v1/selfsubjectreviews", timeout=10,
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        verify=str(node.api.ca_path), cert=str(node.file(pem)))
    info = review.json()["status"]["userInfo"]
    assert info["username"] == "system:node:worker-0"
    assert "system:nodes" in info["groups"]


def test_the_kubelet_registers_its_node_with_the_provider_id_of_its_extra_args(
        node: Node) -> None:
    """kubeletExtraArgs go into kubeadm-flags.env (flags.go); the kubelet's --provider-id
    is its Node's spec.providerID (kubelet_node_status.go initialNode), by which CAPI's
    Machine controller finds the Node."""
    data = with_join_configuration(
        cloud_config(node.endpoint), "  - name: node-ip\n    value: 192.0.2.20\n",
        "  - name: node-ip\n    value: 192.0.2.20\n"
        "  - name: provider-id\n    value: sandbox:///worker-0\n")
    result, machine = node.run(node.configure({}), machine_facts(data))
    assert result.ok, machine.conditions["NodeJoined"].message
    registered = node.registered("worker-0")
    assert registered is not None
    assert registered["spec"]["providerID"] == "sandbox:///worker-0"
