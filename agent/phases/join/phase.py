"""The join phase: bootstrap files, commands in order, the managed kubeadm join, sentinel.

plan: the files of the bootstrap data (or the rendered JoinConfiguration) with masked
diffs, each runcmd entry, the managed join, the CABPK sentinel; nothing but the sentinel
when the node is already joined to this cluster. apply (the base class) runs them in
order and journals each, so a failed run resumes at the join, not at the first command.
"""

from __future__ import annotations

import difflib
import os
from typing import Any

from agent.errors import CommandError, PermanentError, Reason
from agent.host import Host
from agent.logs import REDACT
from agent.phases.base import Change, Phase, PhaseContext, PhasePlan, file_change
from agent.phases.join.cloudconfig import SENTINEL, Command, KubeadmJoin, WriteFile
from agent.phases.join.managed import KUBELET_CONF, ManagedJoin, node_state
from agent.phases.join.node import confirm_node
from agent.phases.join.preflight import PreflightInputs, run_preflight
from agent.phases.join.source import JoinSource, resolve
from agent.state import digest

JOIN_KEY = "kubeadm-join"


class JoinPhase(Phase):
    name = "join"
    condition = "NodeJoined"
    success = Reason.Joined

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        source = resolve(ctx.config, ctx.machine, ctx.host)
        plan = PhasePlan(self.name)
        plan.notes.append(f"join {source.target.expected_server or 'the cluster'} as Node "
                          f"{source.target.node_name}: {source.facts.api_version} "
                          f"JoinConfiguration from {source.origin}, Kubernetes "
                          f"{source.version}")
        plan.notes.extend(f"not applied by the agent: cloud-config {key}"
                          for key in source.cloud.ignored)
        joined = node_state(ctx.host, source.target.expected_server) == "joined"
        if joined:
            plan.notes.append(f"already joined ({KUBELET_CONF} points at "
                              f"{source.target.expected_server}): kubeadm join and runcmd "
                              "are skipped")
        else:
            plan.changes.extend(c for wf in source.cloud.files
                                if (c := _file_change(ctx.host, wf, source)) is not None)
            for index, step in enumerate(source.cloud.steps):
                if isinstance(step, KubeadmJoin):
                    plan.changes.append(self._join_change(ctx, step, source))
                else:
                    plan.changes.append(_command_change(ctx, index, step))
        sentinel = file_change(ctx.host, SENTINEL, "success\n")
        if sentinel is not None:
            plan.changes.append(sentinel)
        return plan

    def _join_change(self, ctx: PhaseContext, step: KubeadmJoin,
                     source: JoinSource) -> Change:
        spec = ctx.config.spec.join
        ignored = frozenset(n.lower() for n in (*source.facts.ignore_preflight_errors,
                                                 *step.ignore_preflight_errors,
                                                 *spec.node_registration.ignore_preflight_errors))

        def join(host: Host) -> None:
            warnings = run_preflight(host, PreflightInputs(
                version=source.version, cri_socket=source.facts.cri_socket,
                api_server_endpoint=source.facts.api_server_endpoint,
                kubeadm=spec.kubeadm_path, kubelet=spec.kubelet_path,
                dual_stack=spec.dual_stack, br_netfilter=spec.require_br_netfilter,
                ignored=ignored, api_timeout=spec.api_check_timeout,
                time_gate=_time_gate(ctx)))
            for warning in warnings:
                ctx.log.warning("preflight (ignored): %s", warning)
            ManagedJoin(ctx, host, spec.kubeadm_path,
                        lambda machine: resolve(ctx.config, machine, host).target,
                        ).run(source.target)

        return Change(JOIN_KEY,
                      f"{step.shown} (managed: preflight, classified failures, reset and "
                      f"retry, at most {spec.max_attempts} attempt(s))", join,
                      diff=source.masked_config)

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> dict[str, Any]:
        source = resolve(ctx.config, ctx.machine, ctx.host)
        server = source.target.expected_server
        if node_state(ctx.host, server) != "joined":
            raise PermanentError(f"{KUBELET_CONF} does not point at {server}: the node did "
                                 "not join", reason=Reason.KubeletNotHealthy)
        if not ctx.host.exists(SENTINEL):
            raise PermanentError(f"{SENTINEL} is missing", reason=Reason.InternalError)
        attempts = ctx.journal.extra.get("join", {}).get("attempts", [])
        registered = confirm_node(ctx.host, source.target.node_name,
                                  float(ctx.config.spec.join.registration_timeout),
                                  ctx.progress)
        return {"node": source.target.node_name, "apiServer": server,
                "kubernetesVersion": str(source.version),
                "joinConfiguration": source.facts.api_version,
                "attempts": len(attempts), "nodeRegistered": registered}

    def message(self, result: dict[str, Any]) -> str:
        registered = (f"; Node {result['nodeRegistered']} registered"
                      if result.get("nodeRegistered") else "")
        return (f"Node {result.get('node')} joined {result.get('apiServer')} "
                f"(Kubernetes {result.get('kubernetesVersion')}){registered}")


def _time_gate(ctx: PhaseContext) -> str | None:
    """Why join must wait for the time phase, or None when the gate is open."""
    if "time" in ctx.results or "time" in ctx.config.spec.skip_phases:
        return None
    record = ctx.journal.phases.get("time")
    if record is None:
        return "the time phase has not run: the clock is not known to be right"
    if record.state == "completed":
        return None
    why = f": {record.reason}" if record.reason else ""
    return f"the time phase has not completed ({record.state}{why})"


def _file_change(host: Host, wf: WriteFile, source: JoinSource) -> Change | None:
    owner = _owner_ids(host, wf.owner)
    current = host.read_bytes(wf.path) if host.exists(wf.path) else None
    shown = "\n".join(REDACT(wf.content.decode(errors="replace")).splitlines()) + "\n"
    if wf.append:
        def append(h: Host) -> None:
            before = h.read_bytes(wf.path) if h.exists(wf.path) else b""
            h.write_file(wf.path, before + wf.content, mode=wf.mode, owner=owner)

        def fingerprint(h: Host) -> str:
            return digest(h.read_text(wf.path) if h.exists(wf.path) else None)

        return Change(f"append:{wf.path}", f"append to {wf.path}", append,
                      diff="".join(f"+{line}\n" for line in shown.splitlines()),
                      probe=fingerprint)
    if current == wf.content:
        return None
    before = REDACT(current.decode(errors="replace")) if current is not None else ""
    diff = "".join(difflib.unified_diff(
        before.splitlines(keepends=True), shown.splitlines(keepends=True),
        fromfile=wf.path if current is not None else "/dev/null", tofile=wf.path))

    def write(h: Host) -> None:
        h.write_file(wf.path, wf.content, mode=wf.mode, owner=owner)

    verb = "update" if current is not None else "create"
    return Change(f"write:{wf.path}", f"{verb} {wf.path} (mode {wf.mode:04o})", write,
                  diff=diff)


def _owner_ids(host: Host, owner: tuple[str, str]) -> tuple[int, int] | None:
    """uid and gid from the node's own /etc/passwd and /etc/group (under the root);
    None when they are the agent's own (nothing to change)."""
    ids = []
    for name, table in ((owner[0], "/etc/passwd"), (owner[1], "/etc/group")):
        text = host.read_text(table) or ""
        found = next((int(parts[2]) for line in text.splitlines()
                      if len(parts := line.split(":")) > 2 and parts[0] == name), None)
        if found is None and name == "root":
            found = 0
        if found is None:
            raise PermanentError(f"the bootstrap data wants owner {name!r}, which "
                                 f"{table} does not know", reason=Reason.ConfigInvalid,
                                 hint="create the user in the image or fix the owner")
        ids.append(found)
    uid, gid = ids
    return None if (uid, gid) == (os.geteuid(), os.getegid()) else (uid, gid)


def _command_change(ctx: PhaseContext, index: int, step: Command) -> Change:
    timeout = ctx.config.spec.join.timeout

    def run(host: Host) -> None:
        result = host.run(list(step.argv), timeout=timeout, check=False)
        record: dict[str, Any] = ctx.journal.extra.setdefault("join", {})
        record.setdefault("commands", []).append({
            "index": index, "command": REDACT(step.shown), "exitStatus": result.returncode,
            "outputTail": REDACT(result.tail(500))})
        ctx.journal.save()
        if not result.ok:
            raise CommandError(f"runcmd[{index}] `{REDACT(step.shown)}` exited "
                               f"{result.returncode}: {REDACT(result.tail(500))}",
                               hint="fix the command in the bootstrap data; the agent stops "
                                    "at the first failing command")

    return Change(f"runcmd:{index}:{digest(step.argv)[7:19]}",
                  f"run {REDACT(step.shown)}", run)
