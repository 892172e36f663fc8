"""The kubeadm JoinConfiguration: rendered from `spec.join`, or read from bootstrap data.

The API version follows the Kubernetes version the node joins: `kubeadm.k8s.io/v1beta3`
below 1.31, `v1beta4` from 1.31 (kubeadm 1.31 writes only v1beta4; v1beta3 is deprecated
there: cmd/kubeadm/app/util/config/common.go, validateSupportedVersion).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from agent.config import checks
from agent.config.fragment import yaml_structure_problem
from agent.config.join import DEFAULT_CRI_SOCKET, ControlPlaneJoin, JoinSpec, Taint
from agent.errors import PermanentError, Reason, shown
from agent.logs import REDACTED
from agent.recordtype import record
from agent.templating import render

V1BETA3 = "kubeadm.k8s.io/v1beta3"
V1BETA4 = "kubeadm.k8s.io/v1beta4"
KIND = "JoinConfiguration"
INIT_KIND = "InitConfiguration"
CLUSTER_KIND = "ClusterConfiguration"
KUBEADM_API = re.compile(r"kubeadm\.k8s\.io/v[0-9]+(?:(?:alpha|beta)[0-9]+)?")
"""A kubeadm config apiVersion (v1beta3, v1beta4, a later one): anything else is refused
before it reaches the journal, status and logs (kubeadm would refuse it too)."""


class JoinConfigError(PermanentError):
    reason = Reason.ConfigInvalid


@record(frozen=True)
class Version:
    major: int
    minor: int
    text: str

    @classmethod
    def parse(cls, text: str) -> Version:
        m = re.match(r"^v?(\d+)\.(\d+)", text.strip())
        if m is None:
            raise JoinConfigError(f"{text!r} is not a Kubernetes version",
                                  hint="give e.g. v1.31.2")
        return cls(int(m.group(1)), int(m.group(2)), text.strip())

    def __str__(self) -> str:
        return self.text


def api_version_for(version: Version) -> str:
    return V1BETA4 if (version.major, version.minor) >= (1, 31) else V1BETA3


def go_duration(seconds: float) -> str:
    """Seconds as Go's time.Duration prints them (`2m0s`, `1h0m0s`), which kubeadm reads."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


@record(frozen=True)
class JoinParams:
    """Everything a JoinConfiguration says, validated; the template only lays it out."""

    node_name: str
    cri_socket: str
    discovery_timeout: str
    token: str | None = None
    api_server_endpoint: str | None = None
    ca_cert_hashes: tuple[str, ...] = ()
    kube_config_path: str | None = None
    tls_bootstrap_token: str | None = None
    kubelet_extra_args: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    ignore_preflight_errors: tuple[str, ...] = ()
    control_plane: ControlPlaneJoin | None = None

    @classmethod
    def from_spec(cls, spec: JoinSpec, node_name: str) -> JoinParams:
        if spec.discovery is None:
            raise JoinConfigError("spec.join.discovery is not set",
                                  hint="give spec.join.discovery, or join from bootstrap data")
        if problem := checks.k8s_name(node_name):
            raise JoinConfigError(f"node name: {problem}",
                                  hint="set spec.join.nodeRegistration.name")
        reg, disc = spec.node_registration, spec.discovery
        token = disc.bootstrap_token
        return cls(
            node_name=node_name, cri_socket=reg.cri_socket,
            discovery_timeout=go_duration(spec.discovery_timeout),
            token=token.token if token else None,
            api_server_endpoint=token.api_server_endpoint if token else None,
            ca_cert_hashes=tuple(token.ca_cert_hashes) if token else (),
            kube_config_path=disc.file.kube_config_path if disc.file else None,
            tls_bootstrap_token=disc.file.tls_bootstrap_token if disc.file else None,
            kubelet_extra_args=tuple(sorted(reg.kubelet_extra_args.items())),
            taints=tuple(reg.taints), ignore_preflight_errors=tuple(reg.ignore_preflight_errors),
            control_plane=spec.control_plane)

    def masked(self) -> JoinParams:
        """The same parameters with every secret replaced, for `plan` and logs."""
        cp = self.control_plane
        return replace(
            self, token=REDACTED if self.token else None,
            tls_bootstrap_token=REDACTED if self.tls_bootstrap_token else None,
            control_plane=replace(cp, certificate_key=REDACTED)
            if cp is not None and cp.certificate_key else cp)


def render_join_configuration(params: JoinParams, version: Version) -> str:
    """The JoinConfiguration YAML for `version` (pure)."""
    api = api_version_for(version)
    return render(f"join/joinconfiguration-{api.rsplit('/', 1)[1]}.yaml.j2", p=params)


@record(frozen=True)
class JoinFacts:
    """What the agent needs to know from a JoinConfiguration it did not render."""

    api_version: str
    node_name: str | None
    cri_socket: str
    ignore_preflight_errors: tuple[str, ...]
    token: str | None
    api_server_endpoint: str | None
    kube_config_path: str | None
    control_plane: bool
    certificate_key: str | None = None
    """controlPlane.certificateKey: decrypts the cluster's certificates; secret."""
    command: str = "join"
    """`join`, or `init` (InitConfiguration: the first control plane)."""
    local_endpoint: str | None = None
    """A control plane's own API endpoint (host:port): its kubelet.conf may name it
    instead of the controlPlaneEndpoint (kubeadm's ControlPlaneKubeletLocalMode)."""
    secrets: tuple[str, ...] = ()
    """Other secrets in the file (bootstrap tokens init creates, tlsBootstrapToken)."""
    name_replaced: bool = False
    """nodeRegistration.name is a placeholder the preKubeadmCommands replace."""


def read_join_configuration(text: str) -> JoinFacts:
    """The JoinConfiguration document in a kubeadm config file (bootstrap data)."""
    return read_kubeadm_configuration(text, "join")


def read_kubeadm_configuration(text: str, command: str,
                               replaced_by: tuple[str, ...] = ()) -> JoinFacts:
    """What `kubeadm join` (a JoinConfiguration) or `kubeadm init` (an InitConfiguration
    and at most one ClusterConfiguration, as CABPK writes /run/kubeadm/kubeadm.yaml)
    will do, from its config file. `replaced_by`: the commands that run before kubeadm
    (preKubeadmCommands); a nodeRegistration.name that is no node name but which one of
    them names is a placeholder they replace (Flatcar's `__REPLACE_NODE_NAME__` and
    `sed`), left unchecked here (`JoinFacts.name_replaced`): the file is read again once
    they ran."""
    import yaml

    from agent import yamlsafe

    try:  # aliases and deep nesting refused before a value is built (a bomb)
        refused = yaml_structure_problem(text, yamlsafe.LOADER)
        if refused is not None:
            raise JoinConfigError(f"the kubeadm config file {refused[0]}", hint=refused[1])
        docs = [d for d in yamlsafe.load_all(text) if d]
    except yaml.YAMLError as err:
        raise JoinConfigError(f"the kubeadm config file is not valid YAML: {err}") from err
    kind = INIT_KIND if command == "init" else KIND
    found = [d for d in docs if isinstance(d, dict) and d.get("kind") == kind]
    if len(found) != 1:
        raise JoinConfigError(f"the kubeadm config file has {len(found)} {kind} documents",
                              hint=f"the bootstrap data for kubeadm {command} must carry "
                                   "exactly one")
    doc = found[0]
    if not KUBEADM_API.fullmatch(str(doc.get("apiVersion", ""))):
        raise JoinConfigError(f"{kind} apiVersion: {shown(doc.get('apiVersion'))} is "
                              "not a kubeadm API version",
                              hint="use kubeadm.k8s.io/v1beta4 (v1beta3 before 1.31)")
    reg = _mapping(doc.get("nodeRegistration"))
    # JoinFacts' first four fields, the same in both kinds
    common = (str(doc.get("apiVersion", "")), _str(reg.get("name")),
              _str(reg.get("criSocket")) or DEFAULT_CRI_SOCKET,
              tuple(str(x) for x in reg.get("ignorePreflightErrors") or []))
    if command == "init":
        clusters = [d for d in docs if isinstance(d, dict)
                    and d.get("kind") == CLUSTER_KIND]
        if len(clusters) > 1:
            raise JoinConfigError(f"the kubeadm config file has {len(clusters)} "
                                  f"{CLUSTER_KIND} documents", hint="give at most one")
        cluster = clusters[0] if clusters else {}
        local_endpoint = _local_endpoint(_mapping(doc.get("localAPIEndpoint")))
        facts = JoinFacts(
            *common, token=None,
            # kubelet.conf names the controlPlaneEndpoint (else the local endpoint):
            # app/phases/kubeconfig/kubeconfig.go, getKubeConfigSpecsBase.
            api_server_endpoint=_str(_mapping(cluster).get("controlPlaneEndpoint"))
            or local_endpoint,
            kube_config_path=None, control_plane=True,
            certificate_key=_str(doc.get("certificateKey")),
            command="init", local_endpoint=local_endpoint,
            secrets=tuple(str(_mapping(t).get("token")) for t in
                          doc.get("bootstrapTokens") or [] if _mapping(t).get("token")))
    else:
        discovery = _mapping(doc.get("discovery"))
        token = _mapping(discovery.get("bootstrapToken"))
        control = _mapping(doc.get("controlPlane"))
        facts = JoinFacts(
            *common, token=_str(token.get("token")),
            api_server_endpoint=_str(token.get("apiServerEndpoint")),
            kube_config_path=_str(_mapping(discovery.get("file")).get("kubeConfigPath")),
            control_plane=doc.get("controlPlane") is not None,
            certificate_key=_str(control.get("certificateKey")),
            local_endpoint=(_local_endpoint(_mapping(control.get("localAPIEndpoint")))
                            if doc.get("controlPlane") is not None else None),
            secrets=tuple(s for s in (_str(discovery.get("tlsBootstrapToken")),) if s))
    # the local endpoint first: init's controlPlaneEndpoint defaults to it
    for what, value, check in (
            ("localAPIEndpoint" if command == "init" else "controlPlane.localAPIEndpoint",
             facts.local_endpoint, checks.host_port),
            ("nodeRegistration.criSocket", facts.cri_socket, checks.unix_socket_url),
            ("discovery.bootstrapToken.apiServerEndpoint" if command == "join" else
             "ClusterConfiguration controlPlaneEndpoint", facts.api_server_endpoint,
             checks.host_port),
            ("nodeRegistration.name", facts.node_name, checks.k8s_name)):
        if value is not None and (problem := check(value)):
            if what == "nodeRegistration.name" and any(value in c for c in replaced_by):
                return replace(facts, name_replaced=True)
            raise JoinConfigError(f"{kind} {what}: {problem}")
    return facts


def _local_endpoint(local: dict[str, Any]) -> str | None:
    """host:port of a localAPIEndpoint (an IPv6 address in brackets), None without an
    advertiseAddress."""
    advertise = _str(local.get("advertiseAddress"))
    if advertise is None:
        return None
    return checks.join_host_port(advertise, local.get("bindPort") or 6443)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
