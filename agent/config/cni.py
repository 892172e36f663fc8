"""`spec.cni`: the container network plugins, their configuration list and the manifest."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from agent.config import checks
from agent.config.fields import Duration, setting
from agent.recordtype import record

Problem = tuple[str, str, str | None]

CNI_VERSIONS = ("0.3.0", "0.3.1", "0.4.0", "1.0.0")
"""Spec versions the agent writes and checks (Debian's plugins 1.1.1 speak all of them)."""

HOST_LOCAL_DATA_DIR = "/var/lib/cni/networks"
"""host-local's own data directory (plugins/ipam/host-local backend/disk: defaultDataDir):
the real pool's allocations, which the check must never share."""


def check_data_dir(value: str) -> str | None:
    """An absolute path outside host-local's real data directory."""
    problem = checks.absolute_path(value)
    if problem:
        return problem
    if (value.rstrip("/") + "/").startswith(HOST_LOCAL_DATA_DIR + "/"):
        return (f"{value} is host-local's own data directory ({HOST_LOCAL_DATA_DIR}), "
                "where the node's pods' addresses are recorded; give a directory of the "
                "agent's own, e.g. /var/lib/machine-agent/cni-check")
    return None


def conflist_shape(doc: dict[str, Any]) -> Iterator[Problem]:
    """Structural problems of a conflist: cniVersion, name, and plugins with a `type`.

    What needs the node (binaries present, ranges against its networks) is checked by
    the phase; this is what can be known from the document alone.
    """
    version = doc.get("cniVersion")
    if version not in CNI_VERSIONS:
        yield ("cniVersion", f"{version!r} is not a supported CNI version",
               f"use one of {', '.join(CNI_VERSIONS)}")
    name = doc.get("name")
    problem = checks.cni_network_name(name) if isinstance(name, str) else "is required"
    if problem:
        yield ("name", problem, None)
    plugins = doc.get("plugins")
    if not isinstance(plugins, list) or not plugins:
        yield ("plugins", "must be a non-empty list of plugin configurations", None)
        return
    for i, plugin in enumerate(plugins):
        kind = plugin.get("type") if isinstance(plugin, dict) else None
        problem = checks.plugin_type(kind) if isinstance(kind, str) else "is required"
        if problem:
            yield (f"plugins[{i}].type", problem, None)


@record(frozen=True)
class PluginSource:
    source: Literal["image", "bundle", "url"] = setting(
        "Where the plugin binaries come from: already in the image (binDir), a local "
        "tar.gz bundle on the node, or a tar.gz downloaded over https.", default="image")
    path: str | None = setting("The bundle's path on the node (source: bundle).",
                               default=None, check=checks.absolute_path)
    url: str | None = setting("The bundle's https URL (source: url).", default=None,
                              check=checks.https_url)
    sha256: str | None = setting("sha256 of the tar.gz; mandatory for bundle and url, "
                                 "checked before anything is written.", default=None,
                                 check=checks.sha256)

    def validate(self) -> Iterator[Problem]:
        needs = {"image": (), "bundle": ("path", "sha256"), "url": ("url", "sha256")}
        for name in needs[self.source]:
            if getattr(self, name) is None:
                yield (name, f"is required with source: {self.source}", None)
        for name in ("path", "url", "sha256"):
            if name not in needs[self.source] and getattr(self, name) is not None:
                yield (name, f"is not used with source: {self.source}", "remove it")


@record(frozen=True)
class TemplateValues:
    name: str = setting("The network's name.", default="machine-agent",
                        check=checks.cni_network_name)
    cni_version: str = setting("CNI spec version of the list.", default="1.0.0",
                               check=checks.one_of(CNI_VERSIONS))
    bridge: str = setting("Bridge device on the node (template: bridge).", default="cni0",
                          check=checks.interface_name)
    subnet: str | None = setting("Pod subnet of this node, e.g. 198.51.100.0/24 "
                                 "(template: bridge).", default=None, check=checks.ip_network)
    gateway: str | None = setting("Gateway inside the subnet; default: its first address.",
                                  default=None, check=checks.ip_address)
    mtu: int | None = setting("MTU of the bridge and pod interfaces.", default=None,
                              check=checks.mtu)
    ip_masq: bool = setting("Masquerade traffic leaving the pod subnet.", default=True)
    hairpin_mode: bool = setting("Let a pod reach itself through a Service.", default=True)
    is_default_gateway: bool = setting("Route pods' default traffic through the bridge.",
                                       default=True)


@record(frozen=True)
class ConflistSpec:
    inline: dict[str, Any] | None = setting(
        "The network configuration list itself (cniVersion, name, plugins).", default=None)
    template: Literal["bridge", "flannel"] | None = setting(
        "Render a built-in list: `bridge` (bridge + host-local + portmap + loopback) or "
        "`flannel` (delegating to flannel + portmap).", default=None)
    values: TemplateValues = setting("Values for the template.", factory=TemplateValues)
    file_name: str = setting("File name in confDir; lowest name wins with runtimes.",
                             default="10-machine-agent.conflist", check=checks.conflist_name)

    def validate(self) -> Iterator[Problem]:
        if (self.inline is None) == (self.template is None):
            yield ("", "give exactly one of inline or template", None)
        if self.template == "bridge" and self.values.subnet is None:
            yield ("values.subnet", "is required with template: bridge",
                   "give the node's pod subnet, e.g. 198.51.100.0/24")
        if self.inline is not None:
            yield from (("inline." + sub if sub else "inline", msg, hint)
                        for sub, msg, hint in conflist_shape(self.inline))


@record(frozen=True)
class CheckSpec:
    enabled: bool = setting("Prove the list with ADD/CHECK/DEL against a throwaway network "
                            "namespace. Turn off for delegating plugins whose daemon is not "
                            "running yet: a list delegating to flannel is refused with it "
                            "on (flanneld runs only after the node joined).", default=True)
    data_dir: str = setting("host-local's data directory during the check, so the check "
                            "never takes an address from the real pool. Each check uses "
                            "a subdirectory of its own, marked as the agent's; nothing "
                            "else in it is touched. Never host-local's own "
                            f"{HOST_LOCAL_DATA_DIR}.",
                            default="/var/lib/machine-agent/cni-check",
                            check=check_data_dir)
    timeout: Duration = setting("Time-out of one plugin call.", default=Duration(30),
                                check=checks.positive)


@record(frozen=True)
class ConfigMapRef:
    name: str = setting("The ConfigMap's name, in the Machine's namespace.",
                        check=checks.k8s_name)
    key: str = setting("The data key holding the manifest.", default="manifest.yaml",
                       check=checks.configmap_key)


MANIFEST_SOURCES = (("file", "file"), ("url", "url"), ("config_map_ref", "configMapRef"))
"""The manifest's sources: (attribute, document key)."""


@record(frozen=True)
class ManifestSpec:
    file: str | None = setting("Multi-document YAML manifest on the node.", default=None,
                               check=checks.absolute_path)
    url: str | None = setting("Manifest's https URL (with sha256).", default=None,
                              check=checks.https_url)
    config_map_ref: ConfigMapRef | None = setting(
        "A ConfigMap on the management cluster, in the Machine's namespace, read with the "
        "agent's management credentials (the node's RBAC grants `get` on it by name).",
        default=None)
    sha256: str | None = setting("sha256 of the manifest; mandatory with url, optional "
                                 "with file or configMapRef.", default=None,
                                 check=checks.sha256)
    apply: Literal["auto", "always", "never"] = setting(
        "Whether this node applies the manifest. `always`: this is the first control-plane "
        "node; `never`; `auto`: the Machine says so (labelled "
        "cluster.x-k8s.io/control-plane while its Cluster's control plane is not "
        "initialized yet, or this node applied it before). A worker Machine never applies "
        "it; `machine-agent plan` shows the decision and why.", default="auto")
    kubeconfig: str = setting("Admin kubeconfig of the workload cluster.",
                              default="/etc/kubernetes/admin.conf", check=checks.absolute_path)
    node_name: str | None = setting("Node to wait for; default: the join result's node "
                                    "name, else /etc/hostname.", default=None,
                                    check=checks.k8s_name)
    ready_timeout: Duration = setting("How long to wait for the Node to be Ready.",
                                      default=Duration(600), check=checks.positive)

    def validate(self) -> Iterator[Problem]:
        given = [key for attr, key in MANIFEST_SOURCES if getattr(self, attr) is not None]
        if len(given) != 1:
            got = f" (got {' and '.join(given)})" if given else ""
            yield ("", f"give exactly one of file, url or configMapRef{got}", None)
        if self.url is not None and self.sha256 is None:
            yield ("sha256", "is required with url", "give the manifest's sha256")


@record(frozen=True)
class CNISpec:
    bin_dir: str = setting("Directory of the plugin binaries.", default="/opt/cni/bin",
                           check=checks.absolute_path)
    conf_dir: str = setting("Directory of the network configuration lists.",
                            default="/etc/cni/net.d", check=checks.absolute_path)
    plugins: PluginSource = setting("Where the plugin binaries come from.",
                                    factory=PluginSource)
    conflist: ConflistSpec | None = setting(
        "The network configuration list to write; none: a manifest's DaemonSet writes it.",
        default=None)
    check: CheckSpec = setting("The throwaway ADD/CHECK/DEL proof; must be turned off "
                               "(enabled: false) for a list delegating to flannel.",
                               factory=CheckSpec)
    manifest: ManifestSpec | None = setting(
        "CNI manifest applied to the workload cluster by the first control-plane node "
        "(see manifest.apply); server-side apply is safe to repeat.", default=None)
    ready_timeout: Duration = setting(
        "On a joined node that does not apply a manifest: how long to wait, once the list "
        "is written, for the kubelet to turn the Node Ready (read with its kubelet.conf).",
        default=Duration(600), check=checks.positive)

    def validate(self) -> Iterator[Problem]:
        if self.check.enabled and self.conflist is not None and _flannel(self.conflist):
            # flannel's plugin reads /run/flannel/subnet.env, which flanneld writes only
            # once its DaemonSet runs on the joined node: after this phase, so the proof
            # would fail on every node (flannel-io/cni-plugin loadFlannelSubnetEnv).
            yield ("check.enabled", "the check cannot pass with a list delegating to "
                   "flannel: its plugin needs /run/flannel/subnet.env, which flanneld "
                   "writes only once its DaemonSet runs on the joined node",
                   "set spec.cni.check.enabled: false")


def _flannel(spec: ConflistSpec) -> bool:
    """Whether the list delegates to flannel (the template, or an inline flannel plugin)."""
    plugins = (spec.inline or {}).get("plugins")
    return spec.template == "flannel" or (isinstance(plugins, list) and any(
        isinstance(p, dict) and p.get("type") == "flannel" for p in plugins))
