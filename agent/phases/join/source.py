"""Where the join comes from: the Machine's bootstrap data, a local copy of it, or the
agent's own `spec.join`, reduced to one `JoinSource` (pure: reads through the Host only)."""

from __future__ import annotations

from agent.config import AgentConfig
from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.kube.facts import MachineFacts
from agent.logs import REDACT
from agent.phases.join.cloudconfig import (
    BootstrapDataError,
    CloudConfig,
    Command,
    KubeadmJoin,
    WriteFile,
    parse_cloud_config,
)
from agent.phases.join.datakeys import check_other_keys
from agent.phases.join.joinconfig import (
    JoinFacts,
    JoinParams,
    Version,
    read_kubeadm_configuration,
    render_join_configuration,
)
from agent.phases.join.managed import JoinTarget, kubeconfig_server
from agent.phases.join.node import kubeadm_node_name
from agent.phases.join.ondisk import read_node_file
from agent.phases.join.template import read_instance_data
from agent.recordtype import record

JOIN_CONFIG_PATH = "/run/kubeadm/kubeadm-join-config.yaml"
"""Where CABPK puts the JoinConfiguration; the agent renders its own there too."""


@record(frozen=True)
class JoinSource:
    origin: str
    """Where the join came from, for the plan and the condition message."""
    cloud: CloudConfig
    facts: JoinFacts
    version: Version
    target: JoinTarget
    masked_config: str
    """The JoinConfiguration as `plan` shows it: every secret replaced."""
    notes: tuple[str, ...] = ()
    """What of the bootstrap data is delegated to another phase (for `plan`)."""


def unsourced(config: AgentConfig, machine: MachineFacts | None) -> str | None:
    """Why nothing says yet how this node joins (no Machine was read, spec.join neither
    renders the join nor names a bootstrap data file), or None. An image built with the
    package's own configuration is so until its per-node configuration arrives."""
    spec = config.spec.join
    if machine is not None or spec.source == "config" or spec.bootstrap_data_file:
        return None
    return ("no bootstrap data yet: no Machine was read (spec.management is not set) and "
            "spec.join neither renders the join (source: config) nor names a "
            "bootstrapDataFile")


UNSOURCED_HINT = ("set spec.management so the node reads its Machine's bootstrap data "
                  "(usually from the node's own cloud-init data or kernel command line), or "
                  "spec.join")


def resolve(config: AgentConfig, machine: MachineFacts | None, host: Host, *,
            after_commands: bool = False) -> JoinSource:
    """The join the bootstrap data (or spec.join) asks for. `after_commands`: the
    preKubeadmCommands have run, and the kubeadm config file is read from the node, as
    they left it and kubeadm reads it (they may have set the node name: `sed` of a
    placeholder)."""
    spec = config.spec.join
    node_name = spec.node_registration.name or (machine.name if machine else None)
    version_text = (machine.kubernetes_version if machine else None) or spec.kubernetes_version
    if version_text is None:
        raise PermanentError("no Kubernetes version to join with: the Machine has no "
                             "spec.version and spec.join.kubernetesVersion is not set",
                             reason=Reason.ConfigInvalid,
                             hint="set spec.join.kubernetesVersion, e.g. v1.31.2")
    version = Version.parse(version_text)
    if spec.source == "config":
        if node_name is None:
            raise PermanentError("no node name: no Machine was read and "
                                 "spec.join.nodeRegistration.name is not set",
                                 reason=Reason.ConfigInvalid,
                                 hint="set spec.join.nodeRegistration.name")
        params = JoinParams.from_spec(spec, node_name)
        text = render_join_configuration(params, version)
        masked = render_join_configuration(params.masked(), version)
        cloud = CloudConfig(
            [WriteFile(JOIN_CONFIG_PATH, text.encode(), 0o600, ("root", "root"), False)],
            [KubeadmJoin(JOIN_CONFIG_PATH, (), True,
                         f"kubeadm join --config {JOIN_CONFIG_PATH}")])
        origin = "spec.join"
        notes: list[str] = []
    else:
        data, origin, data_format = _bootstrap_data(spec.bootstrap_data_file, machine, host)
        if data_format == "ignition":
            from agent.phases.join.ignition import parse_ignition  # a format few nodes use

            cloud = parse_ignition(data)
        else:
            cloud = parse_cloud_config(data, node_name=node_name,
                                       instance=read_instance_data(host))
        notes = check_other_keys(cloud.other, config, data_format)
        join = cloud.join
        written = cloud.file(join.config_path)
        text_or_none = (read_node_file(host, join.config_path, "the kubeadm config")
                        if after_commands or not written else written.content.decode())
        if text_or_none is None and written:
            text_or_none = written.content.decode()
        if text_or_none is None:
            raise BootstrapDataError(f"the kubeadm config {join.config_path} is neither in "
                                     "the bootstrap data's write_files nor on the node")
        text = text_or_none
        masked = REDACT(text)
    before = cloud.steps[:cloud.steps.index(cloud.join)]
    facts = read_kubeadm_configuration(text, cloud.join.command, () if after_commands else
                                       tuple(s.text for s in before if isinstance(s, Command)))
    for secret in (facts.token, facts.certificate_key, *facts.secrets):
        REDACT.add(secret)
    if facts.api_server_endpoint:
        server: str | None = f"https://{facts.api_server_endpoint}"
    else:
        server = kubeconfig_server(
            read_node_file(host, facts.kube_config_path, "discovery.file.kubeConfigPath")
            if facts.kube_config_path else None)
    # kubeadm names the node (app/util GetHostname): the configuration's name, else the
    # host name at the time kubeadm runs (a pre-command may set it: resolved again then)
    name = kubeadm_node_name(host, facts.node_name)
    local = f"https://{facts.local_endpoint}" if facts.local_endpoint else None
    target = JoinTarget(cloud.join.config_path, tuple(cloud.files), facts.token, server, name,
                        cloud.join.ignore_preflight_errors, control_plane=facts.control_plane,
                        command=cloud.join.command,
                        local_server=local if local != server else None)
    return JoinSource(origin, cloud, facts, version, target, REDACT(masked), tuple(notes))


def _bootstrap_data(path: str | None, machine: MachineFacts | None,
                    host: Host) -> tuple[str, str, str]:
    """The data, where it came from, and its format (cloud-config or ignition)."""
    if machine is not None and machine.bootstrap_data:
        if machine.bootstrap_format not in (None, "cloud-config", "ignition"):
            raise BootstrapDataError(
                f"the bootstrap data format is {machine.bootstrap_format!r}; the agent "
                "joins from cloud-config or ignition", hint="set the KubeadmConfig's "
                "format to cloud-config or ignition, or use spec.join.source: config")
        data_format = machine.bootstrap_format or _sniff(machine.bootstrap_data)
        return (machine.bootstrap_data, f"Machine {machine.namespace}/{machine.name}",
                data_format)
    if path is not None:
        text = host.read_text(path)
        if text is None:
            raise BootstrapDataError(f"spec.join.bootstrapDataFile {path} does not exist")
        return text, path, _sniff(text)
    raise BootstrapDataError(
        "no bootstrap data: no Machine was read and spec.join.bootstrapDataFile is not set",
        hint="give spec.join.bootstrapDataFile, or spec.join.source: config with discovery")


def _sniff(text: str) -> str:
    """A local copy has no `format` key: ignition is a JSON object, cloud-config not."""
    return "ignition" if text.lstrip().startswith("{") else "cloud-config"
