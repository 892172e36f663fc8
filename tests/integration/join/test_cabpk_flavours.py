"""A cluster made from CABPK bootstrap data, every flavour: the first control plane
(`kubeadm init`), a second control plane (`kubeadm join` with controlPlane), a worker;
cloud-config and Ignition (2.3 as CABPK emits it, 3.x with gzip-compressed contents);
kubeadm v1beta3 and v1beta4 configurations. Each node is its own root; the workload
cluster (API stand-in, kubeadm stand-in world: etcd members, tokens init created,
uploaded certificates) is shared, as on real machines."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from machine_agent_sandbox.testkit.bootstrap import (
    CA_HASH,
    TOKEN,
    Flavour,
    cabpk_cloud_config,
    cabpk_ignition,
    certificate_files,
    init_configuration,
    join_configuration,
)
from machine_agent_sandbox.testkit.node import ca_pin, joinable_cluster

from agent.kube.facts import MachineFacts
from tests.integration.join.conftest import Node, NoSleep

NAMES = ("cp-0", "cp-1", "worker-0")


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Node]]:
    from agent.host import Host

    base = tmp_path_factory.mktemp("c")  # short: the runtime socket path must fit
    with joinable_cluster(base, NAMES) as (world, nodes):
        out = {}
        for name, node in nodes.items():
            clock = NoSleep()
            host = Host(node.root, clock=clock,
                        env={"PATH": f"{node.path}:/usr/bin:/bin"})
            (node.root / "tmp").mkdir()
            (node.root / "run").mkdir(exist_ok=True)
            out[name] = Node(node.root, host, world.world_path, world.endpoint, clock,
                             world.api)
        yield out


def facts(name: str, data: str, data_format: str, version: str) -> MachineFacts:
    return MachineFacts("default", name, f"uid-{name}", "demo", kubernetes_version=version,
                        bootstrap_format=data_format, bootstrap_data=data)


def counted(node: Node, what: str) -> str:
    """A pre/post command that counts its runs in a file under the node's root."""
    return f"echo {what} >> {node.root}/run/commands"


def runs(node: Node) -> list[str]:
    path = node.file("/run/commands")
    return path.read_text().split() if path.exists() else []


def flavours(cluster: dict[str, Node], api: str, certificate_key: str | None = None,
             with_certificates: bool = True) -> dict[str, Flavour]:
    endpoint = cluster["cp-0"].endpoint
    ca_hash = ca_pin(cluster["cp-0"].api)
    cp0, cp1, worker = (cluster[n] for n in NAMES)
    return {
        "cp-0": Flavour("init", init_configuration(endpoint, "cp-0", TOKEN, api,
                                                   certificate_key),
                        tuple(certificate_files()), (counted(cp0, "pre"),),
                        (counted(cp0, "post"),)),
        "cp-1": Flavour("join", join_configuration(endpoint, "cp-1", TOKEN, ca_hash, api,
                                                   control_plane=True,
                                                   certificate_key=certificate_key,
                                                   address="192.0.2.11"),
                        tuple(certificate_files()) if with_certificates else (),
                        (counted(cp1, "pre"),), (counted(cp1, "post"),)),
        "worker-0": Flavour("join", join_configuration(endpoint, "worker-0", TOKEN, ca_hash,
                                                       api),
                            (), (counted(worker, "pre"),), (counted(worker, "post"),)),
    }


FORMATS = {
    # (data format, kubeadm API, Machine version, how the data is rendered)
    "cloud-config-v1beta4": ("cloud-config", "v1beta4", "v1.31.2"),
    "cloud-config-v1beta3": ("cloud-config", "v1beta3", "v1.30.6"),
    "ignition-2.3-v1beta4": ("ignition", "v1beta4", "v1.31.2"),
    "ignition-3.4-gzip-v1beta3": ("ignition", "v1beta3", "v1.30.6"),
}


def render(flavour: Flavour, case: str, node: Node) -> str:
    if case.startswith("cloud-config"):
        return cabpk_cloud_config(flavour)
    if case.startswith("ignition-3"):
        return cabpk_ignition(flavour, "3.4.0", compress=True, root=str(node.root))
    return cabpk_ignition(flavour, root=str(node.root))


@pytest.mark.parametrize("case", sorted(FORMATS))
def test_first_control_plane_second_control_plane_and_worker_bootstrap_from_cabpk_data(
        cluster: dict[str, Node], case: str) -> None:
    data_format, api, version = FORMATS[case]
    any_node = cluster["cp-0"]
    any_node.set_world(version=version)
    for name, flavour in flavours(cluster, api).items():
        node = cluster[name]
        result, machine = node.run(node.configure({}),
                                   facts(name, render(flavour, case, node), data_format,
                                         version))
        joined = machine.conditions["NodeJoined"]
        assert result.ok, (name, result.outcomes)
        verb = "initialised the cluster at" if name == "cp-0" else "joined"
        assert joined.message == (f"Node {name} {verb} https://{node.endpoint} (Kubernetes "
                                  f"{version}); Node {name} registered")
        assert node.joined() and node.registered(name) is not None
        assert node.file("/run/cluster-api/bootstrap-success.complete").read_text() == \
            "success\n"
        assert runs(node) == ["pre", "post"]  # each command ran once, around kubeadm
    world = any_node.world
    # kubeadm init made the cluster (its etcd, its token); the second control plane
    # joined etcd; the worker did not
    assert world["etcdMembers"] == ["cp-0", "cp-1"]
    assert world["joins"] == list(NAMES)
    assert world["tokens"] == {"abcdef": "0123456789abcdef"}
    # each kubeadm command once: the CA files CABPK writes on a control plane are not a
    # half-joined node, so nothing is reset before init or the control-plane join
    assert world["invocations"] == ["init", "join", "join"]
    for name in ("cp-0", "cp-1"):
        assert cluster[name].file("/etc/kubernetes/manifests/kube-apiserver.yaml").exists()
        # the shared CA is the one the bootstrap data brought, not one kubeadm made
        assert "\nca\n" in cluster[name].file("/etc/kubernetes/pki/ca.crt").read_text()
    assert not cluster["worker-0"].file("/etc/kubernetes/manifests/etcd.yaml").exists()
    # a second run joins nothing again and runs no command again
    for name, flavour in flavours(cluster, api).items():
        node = cluster[name]
        again, _ = node.run(node.configure({}), facts(name, render(flavour, case, node),
                                                      data_format, version))
        assert again.ok and runs(node) == ["pre", "post"]
    assert any_node.world["joins"] == list(NAMES)


def test_a_control_plane_joins_with_the_certificates_uploaded_under_its_key(
        cluster: dict[str, Node]) -> None:
    key = "5f" * 32
    plan = flavours(cluster, "v1beta4", certificate_key=key, with_certificates=False)
    for name in ("cp-0", "cp-1"):
        node = cluster[name]
        result, _ = node.run(node.configure({}), facts(name, cabpk_cloud_config(plan[name]),
                                                       "cloud-config", "v1.31.2"))
        assert result.ok, result.outcomes
    # downloaded (kubeadm-certs, decrypted with the key), not brought by the data
    assert cluster["cp-1"].file("/etc/kubernetes/pki/etcd/ca.key").exists()
    assert cluster["cp-0"].world["etcdMembers"] == ["cp-0", "cp-1"]


@pytest.mark.parametrize(("key", "uploaded", "cause"), [
    (None, None, "failure loading certificate for ca: couldn't load the certificate file "
                 "/etc/kubernetes/pki/ca.crt"),
    ("5f" * 32, "6a" * 32, "error downloading certs: error decoding secret data with "
                           "provided key: cipher: message authentication failed"),
])
def test_a_control_plane_without_the_shared_certificates_is_ControlPlaneNotReady(
        cluster: dict[str, Node], key: str | None, uploaded: str | None, cause: str) -> None:
    first = cluster["cp-0"]
    plan = flavours(cluster, "v1beta4", certificate_key=key, with_certificates=False)
    assert first.run(first.configure({}), facts("cp-0", cabpk_cloud_config(
        Flavour("init", plan["cp-0"].config, tuple(certificate_files()))),
        "cloud-config", "v1.31.2"))[0].ok
    if uploaded:
        first.set_world(uploadedCerts={"key": uploaded})
    node = cluster["cp-1"]
    result, machine = node.run(node.configure({"maxAttempts": 1}), facts(
        "cp-1", cabpk_cloud_config(plan["cp-1"]), "cloud-config", "v1.31.2"))
    joined = machine.conditions["NodeJoined"]
    assert not result.ok
    assert joined.reason == "ControlPlaneNotReady"
    assert cause in joined.message, joined.message
    assert runs(node) == ["pre"]  # the post-command presupposes a joined node
    assert node.clean() and first.world["etcdMembers"] == ["cp-0"]


def test_plan_says_which_flavour_it_runs(cluster: dict[str, Node]) -> None:
    from agent.orchestrator import Orchestrator
    from agent.phases.join import JoinPhase

    plan = flavours(cluster, "v1beta4")
    notes = []
    for name in NAMES:
        node = cluster[name]
        (phase,) = Orchestrator(node.configure({}), node.host, phases=[JoinPhase()],
                                machine=facts(name, cabpk_cloud_config(plan[name]), "cloud-config",
                                              "v1.31.2")).plan()
        notes.append(phase.notes[0])
    endpoint = cluster["cp-0"].endpoint
    assert notes == [
        f"initialise the cluster at https://{endpoint} as Node cp-0: kubeadm.k8s.io/v1beta4 "
        "InitConfiguration from Machine default/cp-0, Kubernetes v1.31.2",
        f"join as a control plane https://{endpoint} as Node cp-1: kubeadm.k8s.io/v1beta4 "
        "JoinConfiguration from Machine default/cp-1, Kubernetes v1.31.2",
        f"join https://{endpoint} as Node worker-0: kubeadm.k8s.io/v1beta4 "
        "JoinConfiguration from Machine default/worker-0, Kubernetes v1.31.2"]



def test_a_failing_command_before_kubeadm_in_ignition_stops_the_bootstrap(node: Node) -> None:
    """CABPK's /etc/kubeadm.sh runs under `set -e`: kubeadm.service stops at the failing
    preKubeadmCommand, and kubeadm never runs. So does the agent."""

    (node.root / "tmp").mkdir()
    (node.root / "run").mkdir(exist_ok=True)
    flavour = Flavour("join", join_configuration(node.endpoint, "worker-0", TOKEN, CA_HASH),
                      pre=(counted(node, "pre"), "echo no mirror >&2; false",
                           counted(node, "after-failure")), post=(counted(node, "post"),))
    data = cabpk_ignition(flavour, root=str(node.root))
    loaded, machine_data = node.configure({}), facts("worker-0", data, "ignition", "v1.31.2")
    result, machine = node.run(loaded, machine_data)
    joined = machine.conditions["NodeJoined"]
    assert not result.ok
    assert (joined.status, joined.reason) == ("False", "CommandFailed")
    assert joined.message.startswith(
        "preKubeadmCommands of /etc/kubeadm.sh exited 1: no mirror; kubeadm was not run "
        "(the script runs with `set -e`, so a failing command ends it)"), joined.message
    assert "runcmd" not in joined.message
    assert runs(node) == ["pre"]  # nothing after the failing command, kubeadm included
    assert node.world.get("joins", []) == [] and node.clean()
    assert not node.file("/run/cluster-api/bootstrap-success.complete").exists()
    # the next run runs the script again (nothing of it counts as done)
    again, _ = node.run(loaded, machine_data)
    assert not again.ok and runs(node) == ["pre", "pre"]


def test_a_node_name_the_pre_commands_put_in_place_of_a_placeholder_is_joined_with(
        node: Node) -> None:
    """Flatcar templates (Ignition has no jinja): nodeRegistration.name
    `__REPLACE_NODE_NAME__`, and a preKubeadmCommand `sed`s the host's name into
    /etc/kubeadm.yml before kubeadm reads it."""

    from agent.orchestrator import Orchestrator
    from agent.phases.join import JoinPhase

    (node.root / "tmp").mkdir()
    (node.root / "run").mkdir(exist_ok=True)
    config = join_configuration(node.endpoint, "__REPLACE_NODE_NAME__", TOKEN, CA_HASH)
    sed = (f"bash -c \"sed -i 's/__REPLACE_NODE_NAME__/$(echo worker-0)/g' "
           f"{node.root}/etc/kubeadm.yml\"")
    data = cabpk_ignition(Flavour("join", config, pre=(sed,)), root=str(node.root))
    loaded, machine_data = node.configure({}), facts("other-name", data, "ignition",
                                                     "v1.31.2")
    (plan,) = Orchestrator(loaded, node.host, phases=[JoinPhase()],
                           machine=machine_data).plan()
    assert plan.notes[0].startswith(
        f"join https://{node.endpoint} as the Node the preKubeadmCommands name (they "
        "replace nodeRegistration.name __REPLACE_NODE_NAME__)")
    result, machine = node.run(loaded, machine_data)
    assert result.ok, result.outcomes
    assert machine.conditions["NodeJoined"].message == (
        f"Node worker-0 joined https://{node.endpoint} (Kubernetes v1.31.2); Node worker-0 "
        "registered")
    assert node.registered("worker-0") is not None
    again, machine = node.run(loaded, machine_data)  # /etc/kubeadm.yml was moved to /tmp
    assert again.ok and machine.conditions["NodeJoined"].message.startswith("Node worker-0 ")
