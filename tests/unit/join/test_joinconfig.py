"""JoinConfiguration rendering: v1beta3 below 1.31, v1beta4 from 1.31, compared with
golden files; every rendering is accepted by the strict kubeadm schema of its version."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from machine_agent_sandbox.kubeadm.config import load_join_configuration
from machine_agent_sandbox.kubeadm.node import Failed
from machine_agent_sandbox.testkit.bootstrap import TOKEN, init_configuration, join_configuration

from agent.config.join import (
    BootstrapTokenDiscovery,
    ControlPlaneJoin,
    Discovery,
    JoinSpec,
    NodeRegistration,
    Taint,
)
from agent.phases.join.joinconfig import (
    JoinConfigError,
    JoinParams,
    Version,
    read_kubeadm_configuration,
    render_join_configuration,
)

GOLDEN = Path(__file__).parent / "golden"
SPEC = JoinSpec(
    source="config",
    discovery=Discovery(bootstrap_token=BootstrapTokenDiscovery(
        "abcdef.0123456789abcdef", "192.0.2.10:6443", ["sha256:" + "5e" * 32])),
    node_registration=NodeRegistration(
        kubelet_extra_args={"node-ip": "192.0.2.20", "cgroup-driver": "systemd"},
        taints=[Taint("dedicated", "NoSchedule", "gpu")], ignore_preflight_errors=["Swap"]),
    control_plane=ControlPlaneJoin("192.0.2.20", 6443, "ab" * 32))


@pytest.mark.parametrize(("version", "golden"), [
    ("v1.30.4", "joinconfiguration-v1beta3.yaml"),
    ("v1.31.0", "joinconfiguration-v1beta4.yaml"),
    ("1.33", "joinconfiguration-v1beta4.yaml"),
])
def test_rendering_matches_the_golden_file_of_its_api_version(
        version: str, golden: str, tmp_path: Path) -> None:
    text = render_join_configuration(JoinParams.from_spec(SPEC, "worker-0"),
                                     Version.parse(version))
    assert text == (GOLDEN / golden).read_text()
    path = tmp_path / "join.yaml"
    path.write_text(text)
    assert load_join_configuration(path)["kind"] == "JoinConfiguration"


def test_masked_rendering_hides_every_secret() -> None:
    text = render_join_configuration(JoinParams.from_spec(SPEC, "worker-0").masked(),
                                     Version.parse("v1.31.0"))
    assert "0123456789abcdef" not in text and "ab" * 32 not in text
    assert 'token: "***"' in text and 'certificateKey: "***"' in text


@pytest.mark.parametrize(("change", "wording"), [
    (lambda t: t.replace("kubeadm.k8s.io/v1beta4", "kubeadm.k8s.io/v1beta2"),
     "your configuration file uses an old API spec: \"kubeadm.k8s.io/v1beta2\""),
    (lambda t: t.replace("kubeadm.k8s.io/v1beta4", "kubeadm.k8s.io/v1beta9"),
     "no kind \"JoinConfiguration\" is registered for version \"kubeadm.k8s.io/v1beta9\""),
    (lambda t: t.replace("nodeRegistration:", "nodeRegistration:\n  nodeIP: x"),
     "strict decoding error: unknown field \"nodeRegistration.nodeIP\""),
    # v1beta4 moved discovery.timeout to timeouts.discovery
    (lambda t: t.replace("discovery:\n", "discovery:\n  timeout: 5m0s\n", 1),
     "unknown field \"discovery.timeout\""),
])
def test_the_kubeadm_on_path_refuses_what_kubeadm_refuses(
        change: object, wording: str, tmp_path: Path) -> None:
    text = render_join_configuration(JoinParams.from_spec(SPEC, "worker-0"),
                                     Version.parse("v1.31.0"))
    path = tmp_path / "join.yaml"
    path.write_text(change(text))  # type: ignore[operator]
    with pytest.raises(Failed, match=wording.replace("(", r"\(").replace(".", r"\.")):
        load_join_configuration(path)


def kubeadm_config(command: str, local: dict[str, object]) -> str:
    """A control plane's kubeadm config as bootstrap data carries it (the test kit's):
    an InitConfiguration, or a JoinConfiguration with a controlPlane section."""
    if command == "init":
        return init_configuration("192.0.2.10:6443", "cp-0", TOKEN, local=local)
    return join_configuration("192.0.2.10:6443", "cp-1", control_plane=True, local=local)


@pytest.mark.parametrize(("command", "local", "endpoint"), [
    ("join", {"advertiseAddress": "2001:db8::20", "bindPort": 6444}, "[2001:db8::20]:6444"),
    ("join", {"advertiseAddress": "192.0.2.20"}, "192.0.2.20:6443"),
    ("init", {"advertiseAddress": "2001:db8::20"}, "[2001:db8::20]:6443"),
])
def test_a_control_planes_own_endpoint_is_host_port_with_ipv6_in_brackets(
        command: str, local: dict[str, object], endpoint: str) -> None:
    facts = read_kubeadm_configuration(kubeadm_config(command, local), command)
    assert facts.local_endpoint == endpoint and facts.control_plane
    assert facts.cri_socket == "unix:///var/run/containerd/containerd.sock"


@pytest.mark.parametrize(("command", "local", "field"), [
    ("join", {"advertiseAddress": "192.0.2.20\nx", "bindPort": 6443},
     "JoinConfiguration controlPlane.localAPIEndpoint"),
    ("init", {"advertiseAddress": "192.0.2.20", "bindPort": "6443 --x"},
     "InitConfiguration localAPIEndpoint"),
])
def test_a_hostile_local_endpoint_is_refused_by_its_field(
        command: str, local: dict[str, object], field: str) -> None:
    with pytest.raises(JoinConfigError) as info:
        read_kubeadm_configuration(kubeadm_config(command, local), command)
    assert str(info.value).startswith(f"{field}: ") and "is not host:port" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("api", ["kubeadm.k8s.io/v1beta4\nkind: x", "v1", "", None])
def test_an_api_version_kubeadm_cannot_read_is_refused_escaped(api: str | None) -> None:
    doc = yaml.safe_load(kubeadm_config("join", {"advertiseAddress": "192.0.2.20"}))
    text = yaml.safe_dump({**doc, "apiVersion": api})
    with pytest.raises(JoinConfigError) as info:
        read_kubeadm_configuration(text, "join")
    assert str(info.value).startswith("JoinConfiguration apiVersion: ")
    assert "\n" not in str(info.value) and "v1beta4" in info.value.hint


# What CABPK marshals (cluster-api bootstrap/kubeadm/pkg/types/utils_test.go): sorted keys,
# Go's empty structs and nil slices written out.
CABPK_MARSHALLED = {
    "init-v1beta3": ("init", "apiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\n"
                             "localAPIEndpoint: {}\nnodeRegistration:\n  ignorePreflightErrors:"
                             "\n  - some-preflight-check\n  taints: null\n"),
    "init-v1beta4": ("init", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n"
                             "localAPIEndpoint: {}\nnodeRegistration:\n  ignorePreflightErrors:"
                             "\n  - some-preflight-check\n  taints: null\ntimeouts:\n"
                             "  controlPlaneComponentHealthCheck: 50s\n"),
    "join-v1beta3": ("join", "apiVersion: kubeadm.k8s.io/v1beta3\ndiscovery: {}\n"
                             "kind: JoinConfiguration\nnodeRegistration:\n"
                             "  ignorePreflightErrors:\n  - some-preflight-check\n"
                             "  taints: null\n"),
    "join-v1beta4": ("join", "apiVersion: kubeadm.k8s.io/v1beta4\ndiscovery: {}\n"
                             "kind: JoinConfiguration\nnodeRegistration:\n"
                             "  ignorePreflightErrors:\n  - some-preflight-check\n"
                             "  taints: null\ntimeouts:\n  controlPlaneComponentHealthCheck: "
                             "50s\n"),
}


@pytest.mark.parametrize("case", sorted(CABPK_MARSHALLED))
def test_kubeadm_documents_as_cabpk_marshals_them_are_read(case: str) -> None:
    command, text = CABPK_MARSHALLED[case]
    facts = read_kubeadm_configuration(text, command)
    assert facts.ignore_preflight_errors == ("some-preflight-check",)
    assert facts.local_endpoint is None and facts.node_name is None
    assert facts.api_version == f"kubeadm.k8s.io/{case.split('-')[1]}"
