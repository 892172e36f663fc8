"""`spec.join`: how the node joins the workload cluster.

By default the node joins from its Machine's CABPK bootstrap data (or a local copy of it
in `bootstrapDataFile`); with `source: config` the agent renders the JoinConfiguration
from this section instead. Every value here reaches a file or a command line, so each
one is checked; the token and the certificate key are secrets and are never shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from agent.config import checks
from agent.config.fields import Duration, setting
from agent.recordtype import record

DEFAULT_CRI_SOCKET = "unix:///var/run/containerd/containerd.sock"


@record(frozen=True)
class BootstrapTokenDiscovery:
    token: str = setting("The bootstrap token, `abcdef.0123456789abcdef`.",
                         check=checks.bootstrap_token, secret=True)
    api_server_endpoint: str = setting("The workload API server as host:port.",
                                       check=checks.host_port)
    ca_cert_hashes: list[str] = setting(
        "Pins of the cluster CA's public key (`sha256:...`); at least one: the agent "
        "never joins without verifying the CA.", factory=list, check=checks.ca_cert_hash)


@record(frozen=True)
class FileDiscovery:
    kube_config_path: str = setting("A kubeconfig with the cluster's endpoint and CA.",
                                    check=checks.absolute_path)
    tls_bootstrap_token: str | None = setting(
        "Token for the TLS bootstrap when the kubeconfig carries no credentials.",
        default=None, check=checks.bootstrap_token, secret=True)


@record(frozen=True)
class Discovery:
    bootstrap_token: BootstrapTokenDiscovery | None = setting(
        "Discovery by bootstrap token.", default=None)
    file: FileDiscovery | None = setting("Discovery by a kubeconfig file.", default=None)

    def validate(self) -> Iterator[tuple[str, str, str | None]]:
        if (self.bootstrap_token is None) == (self.file is None):
            yield ("", "give exactly one of bootstrapToken and file", None)
        if self.bootstrap_token is not None and not self.bootstrap_token.ca_cert_hashes:
            yield ("bootstrapToken.caCertHashes", "is required",
                   "pin the cluster CA: `kubeadm token create --print-join-command` "
                   "prints the hash")


@record(frozen=True)
class Taint:
    key: str = setting("Taint key.", check=checks.label_key)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = setting(
        "Taint effect.")
    value: str = setting("Taint value.", default="", check=checks.label_value)


@record(frozen=True)
class NodeFile:
    path: str = setting("Absolute path of the file.", check=checks.absolute_path)
    content: str = setting("Its content (text).", default="")
    permissions: str = setting("Octal mode.", default="0644", check=checks.octal_mode)
    owner: str = setting("user:group, as the node's /etc/passwd and /etc/group know them.",
                         default="root:root", check=checks.file_owner)


@record(frozen=True)
class NodeRegistration:
    name: str | None = setting(
        "Node name of the JoinConfiguration the agent renders; default: the Machine's "
        "name. Bootstrap data names its own (its nodeRegistration.name, else the host "
        "name, lowercased, as kubeadm takes it).", default=None, check=checks.k8s_name)
    cri_socket: str = setting("Container runtime endpoint.", default=DEFAULT_CRI_SOCKET,
                              check=checks.unix_socket_url)
    kubelet_extra_args: dict[str, str] = setting(
        "Extra kubelet flags by name (without dashes).", factory=dict,
        check=checks.kubelet_args)
    taints: list[Taint] = setting("Taints the Node registers with.", factory=list)
    ignore_preflight_errors: list[str] = setting(
        "Preflight checks (kubeadm's and the agent's, by name) that only warn; `all`.",
        factory=list, check=checks.preflight_check_name)


@record(frozen=True)
class ControlPlaneJoin:
    advertise_address: str | None = setting(
        "Address this node's API server advertises.", default=None,
        check=checks.ip_address)
    bind_port: int = setting("Port this node's API server binds.", default=6443,
                             check=checks.port)
    certificate_key: str | None = setting(
        "Key that decrypts the control-plane certificates uploaded by `kubeadm init`.",
        default=None, check=checks.hex_key, secret=True)


@record(frozen=True)
class JoinSpec:
    source: Literal["bootstrapData", "config"] = setting(
        "Join from the Machine's CABPK bootstrap data, or from this section.",
        default="bootstrapData")
    bootstrap_data_file: str | None = setting(
        "A local copy of the bootstrap data (cloud-config), used when no Machine was "
        "read: joins without a management cluster.", default=None,
        check=checks.absolute_path)
    max_attempts: int = setting("kubeadm join attempts before giving up.", default=3,
                                check=checks.positive)
    timeout: Duration = setting("Time-out of one kubeadm join.", default=Duration(300),
                                check=checks.positive)
    discovery_timeout: Duration = setting(
        "How long kubeadm waits for the cluster-info during discovery.",
        default=Duration(120), check=checks.positive)
    retry_delay: Duration = setting(
        "First pause between join attempts (doubles, with jitter).", default=Duration(5),
        check=checks.positive)
    discovery: Discovery | None = setting(
        "How kubeadm finds and trusts the cluster (source: config).", default=None)
    node_registration: NodeRegistration = setting(
        "How the Node registers (source: config; name and ignored checks apply to both; "
        "on a joined node, kubeletExtraArgs are kept in the kubelet's flags in place).",
        factory=NodeRegistration)
    control_plane: ControlPlaneJoin | None = setting(
        "Join as a control-plane node (source: config).", default=None)
    kubernetes_version: str | None = setting(
        "Kubernetes version when no Machine gives spec.version, e.g. v1.31.2.",
        default=None, check=checks.k8s_version)
    kubeadm_path: str = setting("kubeadm program.", default="kubeadm",
                                check=checks.command_name)
    kubelet_path: str = setting("kubelet program.", default="kubelet",
                                check=checks.command_name)
    dual_stack: bool = setting("The cluster is dual-stack: IPv6 forwarding is required.",
                               default=False)
    require_br_netfilter: bool = setting(
        "The CNI needs br_netfilter (bridge-nf-call-iptables = 1).", default=True)
    api_check_timeout: Duration = setting(
        "Time-out of the preflight TCP check of the API endpoint.", default=Duration(5),
        check=checks.positive)
    registration_timeout: Duration = setting(
        "After the join, how long to wait for the kubelet to register the Node (read "
        "from the workload cluster with its kubelet.conf).", default=Duration(120),
        check=checks.positive)
    files: list[NodeFile] = setting(
        "Files kept on a joined node in place (a KubeadmConfig's `files` changed by an "
        "in-place update): written when their content, mode or owner differ; the content "
        "each replaced is kept, and put back when the file is no longer listed.",
        factory=list)
    kubelet_restart_command: list[str] = setting(
        "Command (argv, no shell) that restarts the kubelet after the agent changed its "
        "flags on a joined node (nodeRegistration.kubeletExtraArgs, in place).",
        factory=lambda: ["systemctl", "restart", "kubelet"], check=checks.command_word)
    kubelet_healthz: str = setting(
        "The kubelet's health endpoint, asked after that restart (its healthzPort).",
        default="http://127.0.0.1:10248/healthz", check=checks.loopback_http_url)
    kubelet_restart_timeout: Duration = setting(
        "How long the kubelet has to answer healthy after that restart before the change "
        "is rolled back.", default=Duration(60), check=checks.positive)
    in_place_version: str | None = setting(
        "The Kubernetes release a joined node is to run, set by an in-place update: a "
        "newer patch release of the one its kubelet runs, made with that release's "
        "`kubeadm upgrade node` and kubelet from versionsDir, the kubelet restarted and "
        "proven healthy. The kubelet and its configuration it replaced are kept, and put "
        "back when this names the release before again or is removed (a rollback).",
        default=None, check=checks.k8s_release)
    versions_dir: str = setting(
        "Where the node keeps the Kubernetes releases it may be updated to in place: "
        "RELEASE/kubeadm and RELEASE/kubelet (the agent installs no packages: the image "
        "or your configuration management puts them there).",
        default="/opt/machine-agent/kubernetes", check=checks.absolute_path)
    kubelet_binary: str = setting(
        "The kubelet program the node runs, which an in-place release change replaces.",
        default="/usr/bin/kubelet", check=checks.absolute_path)

    def validate(self) -> Iterator[tuple[str, str, str | None]]:
        paths = [f.path for f in self.files]
        for index, path in enumerate(paths):
            if path in paths[:index]:
                yield (f"files[{index}].path", f"{path} is listed twice", "list it once")
        if self.source == "config" and self.discovery is None:
            yield ("discovery", "is required with source: config",
                   "give discovery.bootstrapToken or discovery.file")
