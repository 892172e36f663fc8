"""AgentConfig: the versioned, typed configuration document."""

from __future__ import annotations

from typing import Any, Literal

from agent.config.cni import CNISpec
from agent.config.fields import PhaseName, setting
from agent.config.identity import IdentitySpec
from agent.config.ipam import IPAMSpec
from agent.config.join import JoinSpec
from agent.config.lifecycle import LifecycleSpec
from agent.config.management import ManagementSpec
from agent.config.network import NetworkSpec
from agent.config.reporting import ReportingSpec
from agent.config.retry import RetrySpec
from agent.config.timesync import TimeSpec
from agent.recordtype import record

API_VERSION = "machine-agent.io/v1alpha1"
KIND = "AgentConfig"


@record(frozen=True)
class AgentSpec:
    identity: IdentitySpec = setting("Which Machine this node is.", factory=IdentitySpec)
    management: ManagementSpec = setting("How to reach the management cluster.",
                                         factory=ManagementSpec)
    network: NetworkSpec = setting("Interfaces, addresses, routes, DNS, host name.",
                                   factory=NetworkSpec)
    ipam: IPAMSpec = setting("IPAM backends' settings.", factory=IPAMSpec)
    time: TimeSpec = setting("NTP and the time gate before join.", factory=TimeSpec)
    join: JoinSpec = setting("How the node joins the workload cluster.", factory=JoinSpec)
    cni: CNISpec = setting("Container network plugins and configuration.", factory=CNISpec)
    reporting: ReportingSpec = setting("Where progress is reported.", factory=ReportingSpec)
    retry: RetrySpec = setting("Retries of temporary failures.", factory=RetrySpec)
    lifecycle: LifecycleSpec = setting(
        "What the daemon does after the bootstrap: Machine deletion, config changes.",
        factory=LifecycleSpec)
    skip_phases: list[PhaseName] = setting("Phases never run on this node.", factory=list)
    phases: dict[str, dict[str, Any]] = setting(
        "Settings of phases installed as plugins (entry point group machine_agent.phases), "
        "by phase name; each phase checks its own (`config validate` too).", factory=dict)


@record(frozen=True)
class AgentConfig:
    api_version: Literal["machine-agent.io/v1alpha1"] = setting(
        f"Always {API_VERSION}.")
    kind: Literal["AgentConfig"] = setting(f"Always {KIND}.")
    spec: AgentSpec = setting("The configuration.", factory=AgentSpec)
