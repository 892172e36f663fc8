"""`spec.identity`: which Machine this node is."""

from __future__ import annotations

import re
from collections.abc import Iterator

from agent.config import checks
from agent.config.fields import setting
from agent.recordtype import record

Problem = tuple[str, str, str | None]


@record(frozen=True)
class MachineRef:
    name: str = setting("Name of the Machine object.", check=checks.k8s_name)
    namespace: str = setting("Namespace of the Machine.", default="default",
                             check=checks.k8s_namespace)


@record(frozen=True)
class DiscoverySpec:
    host_uuid_label: str = setting(
        "Label whose value is this host's DMI product UUID; used when no machine is named.",
        default="machine-agent.io/host-uuid", check=checks.label_key,
        key="hostUUIDLabel")
    host_serial_label: str | None = setting(
        "Label whose value is this host's DMI serial number; when set, the Machine must "
        "carry it as well as the UUID label (for firmware whose UUIDs are not unique).",
        default=None, check=checks.label_key)
    provider_id_pattern: str | None = setting(
        "Regular expression matched against Machine spec.providerID instead of the label; "
        "the text {uuid} in it stands for this host's DMI product UUID.",
        default=None, key="providerIDPattern")
    namespace: str | None = setting(
        "Namespace to search for the Machine; all namespaces when unset (needs a "
        "ClusterRole that may list Machines).", default=None, check=checks.k8s_namespace)

    def validate(self) -> Iterator[Problem]:
        if self.provider_id_pattern is not None:
            try:
                re.compile(self.provider_id_pattern)
            except re.error as err:
                yield ("providerIDPattern", f"is not a regular expression: {err}", None)


@record(frozen=True)
class IdentitySpec:
    machine: MachineRef | None = setting(
        "The Machine this node is. Without it, the Machine is discovered.", default=None)
    discovery: DiscoverySpec = setting("How to find the Machine when none is named.",
                                       factory=DiscoverySpec)
    node_name: str | None = setting(
        "Kubernetes Node name; defaults to the Machine's name.", default=None,
        check=checks.k8s_name)
