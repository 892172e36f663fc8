"""The cni phase: plugin binaries installed, the network configuration list written and
proved with the real plugins, and (on the first control-plane node) the CNI manifest
applied to the workload cluster until this Node is Ready."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.phases.base import Change, Phase, PhaseContext, PhasePlan, file_change
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

APPLIED = "manifestApplied"
"""Journal key (extra["cni"]): the sha256 of the manifest this node applied."""

ClusterFactory = Callable[[Host, str], WorkloadCluster]
"""Builds the workload-cluster client from (host, kubeconfig path)."""


def _kubeconfig_cluster(host: Host, kubeconfig: str) -> WorkloadCluster:
    from agent.phases.cni.workload import KubeconfigCluster

    return KubeconfigCluster(host, kubeconfig)


class CNIPhase(Phase):
    name = "cni"
    condition = "CNIReady"
    success = Reason.CNIInstalled

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
                journal.extra.setdefault("cni", {})[APPLIED] = manifest.sha256
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
                        node_networks(ctx.config, ctx.results))
        if found.problems:
            what = "nothing was written" if before_writing else "the written list is wrong"
            raise ConflistError(
                f"the CNI configuration list is refused ({what}):\n  "
                + "\n  ".join(found.problems))
        return found

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> dict[str, Any]:
        spec = ctx.config.spec.cni
        result: dict[str, Any] = {"binDir": spec.bin_dir}
        if spec.conflist is not None:
            path = f"{spec.conf_dir}/{spec.conflist.file_name}"
            doc = json.loads(ctx.host.read_text(path) or "{}")
            found = self._examine(ctx, doc, set(), before_writing=False)
            result.update(conflist=path, network=doc["name"],
                          plugins=sorted({t for _, t in plugin_types(doc)}))
            if spec.check.enabled:
                result["check"] = prove(ctx.host, doc, spec.bin_dir, spec.check, found.ranges)
        decision = _decision(ctx)
        if decision is not None:
            result["manifest"] = {"applied": decision.apply, "why": decision.why}
        if spec.manifest is not None and decision is not None and decision.apply:
            node = spec.manifest.node_name or self._node_name(ctx)
            cluster = self.cluster(ctx.host, spec.manifest.kubeconfig)
            wait_node_ready(cluster, node, float(spec.manifest.ready_timeout), ctx.host,
                            ctx.progress)
            result.update(node=node, nodeReady=True)
        return result

    @staticmethod
    def _node_name(ctx: PhaseContext) -> str:
        joined = (ctx.results.get("join") or {}).get("nodeName")
        if joined:
            return str(joined)
        hostname = (ctx.host.read_text("/etc/hostname") or "").strip().lower()
        if not hostname:
            raise PermanentError("cannot tell which Node to wait for: no join result and "
                                 "no /etc/hostname", reason=Reason.CNIBroken,
                                 hint="set spec.cni.manifest.nodeName")
        return hostname

    def message(self, result: dict[str, Any]) -> str:
        parts = []
        if "conflist" in result:
            parts.append(f"network {result['network']} in {result['conflist']}")
        check = result.get("check")
        if check:
            parts.append(f"proved with {'/'.join(check['commands'])} "
                         f"(pod got {check['address']})")
        elif "conflist" in result:
            parts.append("not proved: spec.cni.check.enabled is false")
        if result.get("nodeReady"):
            parts.append(f"Node {result['node']} is Ready")
        manifest = result.get("manifest")
        if manifest and not manifest["applied"]:
            parts.append(f"CNI manifest not applied here ({manifest['why']})")
        return "; ".join(parts) or "no CNI configuration list to write (spec.cni.conflist unset)"


def _decision(ctx: PhaseContext) -> Decision | None:
    """Whether this node applies the CNI manifest; None without one."""
    spec = ctx.config.spec.cni.manifest
    if spec is None:
        return None
    applied = bool(ctx.journal.extra.get("cni", {}).get(APPLIED))
    return decide(spec, ctx.machine, applied)
