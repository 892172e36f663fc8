"""The cni phase: plugin binaries installed, the network configuration list written and
proved with the real plugins, and (on the first control-plane node) the CNI manifest
applied to the workload cluster until this Node is Ready."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.kube.workload import KUBELET_CONF
from agent.phases.base import Change, PhaseContext, PhaseOf, PhasePlan, file_change
from agent.phases.cni.check import prove
from agent.phases.cni.conflist import (
    ConflistError,
    Findings,
    examine,
    node_networks,
    plugin_types,
    render,
    to_text,
)
from agent.phases.cni.install import fetch_bundle, install_change
from agent.phases.cni.manifest import (
    Decision,
    WorkloadCluster,
    decide,
    load_manifest,
    wait_node_ready,
)
from agent.phases.cni.result import CNIRecord, CNIResult, ManifestDecision
from agent.phases.facts import CNIConfigList, NodeAddresses, NodeName
from agent.report import NODE_READY
from agent.state import digest

if TYPE_CHECKING:
    from agent.phases.checks import Check, Doctor

ClusterFactory = Callable[[Host, str], WorkloadCluster]
"""Builds the workload-cluster client from (host, kubeconfig path)."""


def _kubeconfig_cluster(host: Host, kubeconfig: str) -> WorkloadCluster:
    from agent.kube.workload import KubeconfigCluster

    return KubeconfigCluster(host, kubeconfig, reason=Reason.CNIBroken,
                             missing_hint="the manifest is applied after kubeadm wrote it; "
                                          "fix spec.cni.manifest.kubeconfig")


class CNIPhase(PhaseOf[CNIResult]):
    name = "cni"
    condition = "CNIReady"
    success = Reason.CNIInstalled
    provides = (CNIConfigList,)
    needs = (NodeAddresses, NodeName)
    Result = CNIResult
    also_reports = ((NODE_READY, "the Node's Ready condition on the workload cluster, set "
                                 "once it is True"),)

    def doctor_checks(self, doctor: Doctor) -> Iterator[Check]:
        from agent.phases.cni.doctor import checks  # only `doctor` asks: not in a run

        return checks(self, doctor)

    def __init__(self, cluster: ClusterFactory = _kubeconfig_cluster) -> None:
        self.cluster = cluster

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        spec = ctx.config.spec.cni
        plan = PhasePlan(self.name)
        bundle = fetch_bundle(ctx.host, spec.plugins)
        if bundle is not None:
            install = install_change(ctx.host, spec.bin_dir, bundle)
            if install is not None:
                plan.changes.append(install)
        if spec.conflist is not None:
            doc = render(spec.conflist)
            coming = set(bundle.files) if bundle is not None else set()
            self._examine(ctx, doc, coming, before_writing=True)
            path = f"{spec.conf_dir}/{spec.conflist.file_name}"
            write = file_change(ctx.host, path, to_text(doc))
            if write is not None:
                plan.changes.append(write)
        decision = _decision(ctx)
        if decision is not None:
            plan.notes.append(f"CNI manifest {'applied' if decision.apply else 'not applied'}"
                              f" by this node: {decision.why}")
        if spec.manifest is not None and decision is not None and decision.apply:
            manifest = load_manifest(ctx.host, spec.manifest, ctx.management, ctx.machine)
            make_cluster, kubeconfig = self.cluster, spec.manifest.kubeconfig
            journal = ctx.journal

            def apply(h: Host) -> None:
                cluster = make_cluster(h, kubeconfig)
                for obj in manifest.objects:
                    cluster.apply(obj)
                    h.record_effect(f"apply {obj['kind']} {obj['metadata']['name']}")
                journal.section(CNIRecord).manifest_applied = manifest.sha256
                journal.save()

            plan.changes.append(Change(
                f"manifest:{manifest.sha256}",
                f"server-side apply {len(manifest.objects)} object(s) from {manifest.origin} "
                "to the workload cluster", apply))
        return plan

    def _examine(self, ctx: PhaseContext, doc: dict[str, Any], coming: set[str],
                 *, before_writing: bool) -> Findings:
        spec = ctx.config.spec.cni
        present = {n for n in ctx.host.list_dir(spec.bin_dir)
                   if ctx.host.is_executable(f"{spec.bin_dir}/{n}")}
        found = examine(doc, spec.bin_dir, present | coming,
                        node_networks(ctx.config, ctx.results.node_addresses()),
                        live_addresses(ctx.host))
        if found.problems:
            what = "nothing was written" if before_writing else "the written list is wrong"
            hints = []
            if found.missing:
                hints.append(f"install {', '.join(sorted(set(found.missing)))} into "
                             f"spec.cni.binDir ({spec.bin_dir}) or have the agent install "
                             "them with spec.cni.plugins.source: bundle or url")
            if found.overlap:
                setting = ("spec.cni.conflist.values.subnet"
                           if spec.conflist is not None and spec.conflist.template
                           else "the ranges in spec.cni.conflist.inline")
                hints.append(f"give {setting} a range clear of the node's own networks")
            raise ConflistError(
                f"the CNI configuration list is refused ({what}):\n  "
                + "\n  ".join(found.problems),
                hint="; ".join(hints) or "fix spec.cni.conflist")
        return found

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> CNIResult:
        spec = ctx.config.spec.cni
        result = CNIResult(bin_dir=spec.bin_dir)
        if spec.conflist is not None:
            path = f"{spec.conf_dir}/{spec.conflist.file_name}"
            text = ctx.host.read_text(path) or "{}"
            doc = json.loads(text)
            found = self._examine(ctx, doc, set(), before_writing=False)
            result.conflist, result.network = path, doc["name"]
            result.plugins = sorted({t for _, t in plugin_types(doc)})
            result.conflist_digest = digest(text)
            if spec.check.enabled:
                result.check = prove(ctx.host, doc, spec.bin_dir, spec.check, found.ranges)
        decision = _decision(ctx)
        if decision is not None:
            result.manifest = ManifestDecision(decision.apply, decision.why)
        if spec.manifest is not None and decision is not None and decision.apply:
            node = spec.manifest.node_name or self._node_name(ctx)
            wait = (spec.manifest.kubeconfig, spec.manifest.ready_timeout,
                    "the CNI manifest was applied")
        elif spec.conflist is not None and ctx.host.exists(KUBELET_CONF):
            # A joined node: its kubelet turns the Node Ready once the list is in place.
            node = self._node_name(ctx)
            wait = (KUBELET_CONF, spec.ready_timeout, "the CNI configuration was written")
        else:
            return result
        kubeconfig, timeout, since = wait
        state = wait_node_ready(self.cluster(ctx.host, kubeconfig), node, float(timeout),
                                ctx.host, ctx.progress, since)
        result.node, result.node_ready = node, True
        result.node_ready_reason, result.node_ready_message = state.reason, state.message
        return result

    def still_holds(self, ctx: PhaseContext, result: CNIResult) -> bool:
        """The list is as written and every plugin it runs is still an executable in
        binDir: local reads, no download, no proof run again."""
        path, bin_dir = result.conflist, result.bin_dir
        if path is None:
            return True
        text = ctx.host.read_text(path)
        if text is None or digest(text) != result.conflist_digest:
            return False
        return all(ctx.host.is_executable(f"{bin_dir}/{name}") for name in result.plugins)

    @staticmethod
    def _node_name(ctx: PhaseContext) -> str:
        joined = ctx.results.node_name()
        if joined:
            return joined
        hostname = (ctx.host.read_text("/etc/hostname") or "").strip().lower()
        if not hostname:
            raise PermanentError("cannot tell which Node to wait for: no join result and "
                                 "no /etc/hostname", reason=Reason.CNIBroken,
                                 hint="set spec.cni.manifest.nodeName")
        return hostname

    def message(self, result: CNIResult) -> str:
        parts = []
        if result.conflist is not None:
            parts.append(f"network {result.network} in {result.conflist}")
        check = result.check
        if check:
            parts.append(f"proved with {'/'.join(check.commands)} (pod got {check.address})")
        elif result.conflist is not None:
            parts.append("not proved: spec.cni.check.enabled is false")
        if result.node_ready:
            parts.append(f"Node {result.node} is Ready")
        manifest = result.manifest
        if manifest and not manifest.applied:
            parts.append(f"CNI manifest not applied here ({manifest.why})")
        return "; ".join(parts) or "no CNI configuration list to write (spec.cni.conflist unset)"

    def reported(self, result: CNIResult) -> list[tuple[str, Reason, str]]:
        """The Node's Ready condition, once True, as the kubelet put it."""
        if not result.node_ready:
            return []
        why = result.node_ready_reason or str(Reason.KubeletReady)
        text = result.node_ready_message or "Ready"
        return [(NODE_READY, Reason.KubeletReady, f"Node {result.node} is Ready ({why}): "
                                                  f"{text}")]


def live_addresses(host: Host) -> list[tuple[str, str]]:
    """(link, address/prefix) of every global address in the namespace the plugins run
    in (the node's, or the agent's own), read over netlink: what a DHCP lease or the
    image configured counts as much as spec.network."""
    import contextlib

    from agent.netlink.observe import observe
    from agent.netlink.rtnl import connect

    try:
        with contextlib.closing(connect(host)) as rtnl:
            now = observe(rtnl, routes=False)
    except OSError as err:
        where = f"namespace {host.netns}" if host.netns else "the agent's own namespace"
        raise ConflistError(f"cannot read the node's addresses in {where}: "
                            f"{err.strerror or err}",
                            hint="name an existing namespace with --netns") from err
    return sorted((now.name_of(index) or f"link {index}", address)
                  for index, address in now.addresses)


def _decision(ctx: PhaseContext) -> Decision | None:
    """Whether this node applies the CNI manifest; None without one."""
    spec = ctx.config.spec.cni.manifest
    if spec is None:
        return None
    applied = bool(ctx.journal.section(CNIRecord).manifest_applied)
    return decide(spec, ctx.machine, applied)
