"""The join phase: bootstrap files, commands in order, the managed kubeadm join, sentinel.

plan: the files of the bootstrap data (or the rendered JoinConfiguration) with masked
diffs, each runcmd entry, the managed join, the CABPK sentinel (written once the Node is
registered); nothing but the sentinel when the node is already joined to this cluster.
apply (the base class) runs them in order and journals each, so a failed run resumes at
the join, not at the first command.

A failing pre- or post-command does not stop the others (as in cloud-init); the phase
fails once every step ran, naming each failed command (see `JoinPhase.apply`). Ignition's
/etc/kubeadm.sh runs under `set -e`: there a failure before kubeadm stops the phase.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import field, replace
from typing import TYPE_CHECKING

from agent.errors import AgentError, CommandError, PermanentError, Reason
from agent.host import Host
from agent.kube.workload import KUBELET_CONF
from agent.logs import REDACT
from agent.phases.base import Change, PhaseContext, PhaseOf, PhasePlan, file_change
from agent.phases.facts import ClockChecked, ControlPlaneMember, NodeName
from agent.phases.join.cloudconfig import SENTINEL, Command, KubeadmJoin
from agent.phases.join.dropins import environment
from agent.phases.join.filechange import data_file_change
from agent.phases.join.inplace import in_place_changes
from agent.phases.join.managed import ManagedJoin, node_state
from agent.phases.join.node import confirm_node
from agent.phases.join.preflight import PreflightInputs, run_preflight
from agent.phases.join.result import CommandRun, JoinRecord, JoinResult
from agent.phases.join.source import UNSOURCED_HINT, JoinSource, resolve, unsourced
from agent.recordtype import record
from agent.state import digest

if TYPE_CHECKING:
    from agent.phases.checks import Check, Doctor

JOIN_KEY = "kubeadm-join"
TAIL = 500
"""Characters of a command's output kept in the journal and the condition message."""


@record
class JoinPlan(PhasePlan):
    failed: dict[str, str] = field(default_factory=dict)
    """runcmd entries that failed while this plan was applied: step key → what failed."""
    registered: str | None = None
    """The Node confirmed registered while this plan was applied (before the sentinel)."""


class JoinPhase(PhaseOf[JoinResult]):
    name = "join"
    condition = "NodeJoined"
    success = Reason.Joined
    provides = (NodeName, ControlPlaneMember)
    needs = (ClockChecked,)
    Result = JoinResult
    reconfigurable = True
    """On a joined node only its patch release, the kubelet's flags and spec.join.files
    are changed (kubeadm join never runs again: agent/phases/join/inplace.py)."""

    def doctor_checks(self, doctor: Doctor) -> Iterator[Check]:
        from agent.phases.join.doctor import checks  # only `doctor` asks: not in a run

        return checks(self, doctor)

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        plan = JoinPlan(self.name)
        if (why := unsourced(ctx.config, ctx.machine)) is not None:
            plan.notes.append(f"nothing to plan: {why} ({UNSOURCED_HINT})")
            return plan
        source = resolve(ctx.config, ctx.machine, ctx.host)
        facts = source.facts
        what = ("initialise the cluster at" if facts.command == "init" else
                "join as a control plane" if facts.control_plane else "join")
        kind = "InitConfiguration" if facts.command == "init" else "JoinConfiguration"
        name = (f"the Node the preKubeadmCommands name (they replace nodeRegistration.name "
                f"{facts.node_name})" if facts.name_replaced
                else f"Node {source.target.node_name}")
        plan.notes.append(f"{what} {source.target.expected_server or 'the cluster'} as "
                          f"{name}: {facts.api_version} {kind} from "
                          f"{source.origin}, Kubernetes {source.version}")
        plan.notes.extend(source.notes)
        joined = node_state(ctx.host, source.target.servers,
                            ctx.journal.section(JoinRecord)) == "joined"
        if joined:
            plan.notes.append(f"already joined ({KUBELET_CONF} points at "
                              f"{source.target.expected_server}): kubeadm "
                              f"{facts.command}, bootcmd and runcmd are skipped")
            plan.changes.extend(in_place_changes(ctx))
        else:
            plan.changes.extend(_command_change(ctx, index, step, plan.failed, "bootcmd")
                                for index, step in enumerate(source.cloud.boot))
            plan.changes.extend(c for wf in source.cloud.files
                                if (c := data_file_change(ctx.host, wf, ctx.show_secrets))
                                is not None)
            for index, step in enumerate(source.cloud.steps):
                if isinstance(step, KubeadmJoin):
                    plan.changes.append(self._join_change(ctx, step, source))
                else:
                    plan.changes.append(_command_change(ctx, index, step, plan.failed))
        sentinel = file_change(ctx.host, SENTINEL, "success\n")
        if sentinel is not None:
            plan.changes.append(_sentinel_change(ctx, sentinel, source, plan))
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
                # kubeadm init starts the API server: nothing to reach before it
                api_server_endpoint=(None if source.facts.command == "init"
                                     else source.facts.api_server_endpoint),
                kubeadm=spec.kubeadm_path, kubelet=spec.kubelet_path,
                dual_stack=spec.dual_stack, br_netfilter=spec.require_br_netfilter,
                ignored=ignored, api_timeout=spec.api_check_timeout,
                time_gate=_time_gate(ctx)))
            for warning in warnings:
                ctx.log.warning("preflight (ignored): %s", warning)
            # resolved again now, as kubeadm reads the config file: the pre-commands that
            # ran may have put the node name in place of a placeholder (read from the
            # node), or set the host name kubeadm names the node after when none is given
            named = source.facts.name_replaced
            target = resolve(ctx.config, ctx.machine, host, after_commands=named).target
            if named:
                ctx.journal.section(JoinRecord).named = target.node_name
                ctx.journal.save()
            ManagedJoin(ctx, host, spec.kubeadm_path,
                        lambda machine: resolve(ctx.config, machine, host,
                                                after_commands=named).target,
                        ).run(target)

        return Change(JOIN_KEY,
                      f"{step.shown} (managed: preflight, classified failures, reset and "
                      f"retry, at most {spec.max_attempts} attempt(s))", join,
                      diff=source.masked_config, argv=(spec.kubeadm_path, "join"))

    def apply(self, ctx: PhaseContext, plan: PhasePlan) -> None:
        """Run every step; fail afterwards if a runcmd entry failed.

        cloud-init writes runcmd into one `#!/bin/sh` script without `set -e`
        (cloudinit/config/cc_runcmd.py, cloudinit/util.py `shellify`), run by the
        scripts_user module (cloudinit/config/cc_scripts_user.py: `subp.runparts` raises
        when the script exits non-zero, and the module is reported failed). So a failing
        command does not stop the later ones, and neither does it here. The phase then
        fails with CommandFailed, like the module: stricter than cloud-init, whose script
        exits with its last command's status only, because a swallowed failure is the
        silent half-configured node this phase exists to prevent. The managed kubeadm
        join keeps its own classification and stops the phase at once (the node is reset
        clean; post-commands presuppose a joined node). A failed command is not journaled
        as done: a run that has not joined yet runs it again.
        """
        failed = plan.failed if isinstance(plan, JoinPlan) else {}
        try:
            super().apply(ctx, plan)
        except AgentError as err:
            if failed:  # the join failed after pre-commands did: the condition names both
                err.message += (f"; before it, {_count(failed)} failed: "
                                + "; ".join(failed.values()))
                err.args = (err.message,)
            raise
        finally:
            if failed:
                record = ctx.journal.phases[self.name]
                record.steps = [key for key in record.steps if key not in failed]
                ctx.journal.save()
        if failed:
            raise CommandError(
                f"{_count(failed)} failed (the other steps ran"
                f"{', the node joined' if JOIN_KEY in ctx.journal.phases[self.name].steps else ''}"
                "): " + "; ".join(failed.values()),
                hint="fix preKubeadmCommands/postKubeadmCommands; every command's exit "
                     "status and output tail is in the journal")

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> JoinResult:
        source = resolve(ctx.config, ctx.machine, ctx.host)
        server = source.target.expected_server
        if node_state(ctx.host, source.target.servers,
                      ctx.journal.section(JoinRecord)) != "joined":
            raise PermanentError(f"{KUBELET_CONF} does not point at {server}: the node did "
                                 "not join", reason=Reason.KubeletNotHealthy)
        if not ctx.host.exists(SENTINEL):
            raise PermanentError(f"{SENTINEL} is missing", reason=Reason.InternalError)
        record = ctx.journal.section(JoinRecord)
        last = {(c.kind or "runcmd", c.index): c for c in record.commands}
        registered = (plan.registered if isinstance(plan, JoinPlan) and plan.registered
                      else confirm_node(ctx.host, _node_name(ctx, source),
                                        float(ctx.config.spec.join.registration_timeout),
                                        ctx.progress))
        return JoinResult(node=_node_name(ctx, source), api_server=server,
                          local_api_server=source.target.local_server,
                          kubeadm=source.facts.command if source.facts.command != "join"
                          else None,
                          control_plane=True if source.facts.control_plane else None,
                          kubernetes_version=record.release.release
                          if record.release is not None and record.release.done
                          else str(source.version),
                          join_configuration=source.facts.api_version,
                          attempts=len(record.attempts), node_registered=registered,
                          failed_commands=[f"{kind}[{i}] `{c.command}`"
                                           if not kind.startswith("/") else c.command
                                           for (kind, i), c in sorted(last.items())
                                           if c.exit_status != 0])

    def still_holds(self, ctx: PhaseContext, result: JoinResult) -> bool:
        """kubelet.conf still points at the server joined (a `kubeadm reset` removes it)."""
        servers = tuple(s for s in (result.api_server, result.local_api_server) if s)
        return node_state(ctx.host, servers, ctx.journal.section(JoinRecord)) == "joined"

    def message(self, result: JoinResult) -> str:
        registered = (f"; Node {result.node_registered} registered"
                      if result.node_registered else "")
        verb = "initialised the cluster at" if result.kubeadm == "init" else "joined"
        text = (f"Node {result.node} {verb} {result.api_server} "
                f"(Kubernetes {result.kubernetes_version}){registered}")
        failed = result.failed_commands
        if failed:  # a joined node does not run runcmd again: the failure stays named
            text += f"; failed in an earlier run and not run again: {', '.join(failed)}"
        return text


def _sentinel_change(ctx: PhaseContext, write: Change, source: JoinSource,
                     plan: JoinPlan) -> Change:
    """CABPK's sentinel says the node joined: written only once the kubelet registered
    its Node, which `kubeadm join` exiting 0 does not prove. The Node's name is the one
    kubeadm used: journaled when the pre-commands replaced it, else resolved again after
    they ran (the host name they may have set)."""
    timeout = float(ctx.config.spec.join.registration_timeout)

    def confirm_then_write(host: Host) -> None:
        name = _node_name(ctx, source) if source.facts.name_replaced else \
            resolve(ctx.config, ctx.machine, host).target.node_name
        plan.registered = confirm_node(host, name, timeout, ctx.progress)
        write.action(host)

    name = "the preKubeadmCommands' Node" if source.facts.name_replaced \
        else f"Node {source.target.node_name}"
    return replace(write, summary=f"{write.summary} once {name} is registered",
                   action=confirm_then_write)


def _node_name(ctx: PhaseContext, source: JoinSource) -> str:
    """The node's name: the bootstrap data's, or the one its preKubeadmCommands put in
    the config file in place of a placeholder (journaled when kubeadm ran)."""
    if not source.facts.name_replaced:
        return source.target.node_name
    named = ctx.journal.section(JoinRecord).named
    if named is None:
        raise PermanentError(
            f"nodeRegistration.name {source.target.node_name!r} is replaced by the "
            "preKubeadmCommands, and no kubeadm run journaled the name they set",
            reason=Reason.KubeletNotHealthy, hint="run the agent again to join")
    return named


def _count(failed: dict[str, str]) -> str:
    runcmd = all(key.startswith("runcmd:") for key in failed)
    return f"{len(failed)} {'runcmd ' if runcmd else ''}command(s)"


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


def _command_change(ctx: PhaseContext, index: int, step: Command,
                    failed: dict[str, str], kind: str = "runcmd") -> Change:
    """Run one pre- or post-command (`kind` runcmd) or boot command (bootcmd); record
    its exit status and output tail in the journal; a failure goes in `failed` instead
    of stopping the phase, unless the step stops the bootstrap (`Command.stops`)."""
    timeout = ctx.config.spec.join.timeout
    key = f"{kind if step.label is None else 'script'}:{index}:{digest(step.argv)[7:19]}"
    shown = REDACT(step.shown)
    named = f"{kind}[{index}] `{shown}`" if step.label is None else shown

    def run(host: Host) -> None:
        status: int | None
        try:
            result = host.run(list(step.argv), timeout=timeout, check=False,
                              sandboxed=False, secret_args=True,
                              env=environment(host, step.env_files))
            status, tail = result.returncode, REDACT(result.tail(TAIL))
        except AgentError as err:  # not found (a list entry), or its time-out
            status, tail = None, REDACT(err.message)
        ctx.journal.section(JoinRecord).commands.append(
            CommandRun(index, shown, status, tail,
                       step.label if step.label is not None
                       else kind if kind != "runcmd" else None))
        ctx.journal.save()
        if status != 0:
            how = f"exited {status}" if status is not None else "did not run to its end"
            what = f"{named} {how}: {tail or '(no output)'}"
            if step.stops:
                raise CommandError(f"{what}; kubeadm was not run (the script runs with "
                                   "`set -e`, so a failing command ends it)",
                                   hint="fix preKubeadmCommands; the command's exit "
                                        "status and output tail are in the journal")
            failed[key] = what
            ctx.log.warning("%s", failed[key])

    return Change(key, f"run {shown}", run,
                  diff=f"$ {REDACT(step.text)}\n" if ctx.show_secrets and step.text else "",
                  argv=step.argv)
