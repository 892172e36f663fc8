"""What `machine-agent plan` and `run` print: each phase's planned changes, and each
phase's outcome."""

from __future__ import annotations

from agent.host import Host
from agent.orchestrator import RunResult
from agent.phases.base import PhasePlan

IMAGE_TREE = ("commands: {root} is an image tree (--root without --netns): no command "
              "runs on this host. systemctl restarts are deferred to the node's first boot; "
              "kubeadm, ip, chronyc, timedatectl and the like are refused (the agent runs "
              "them on the node); any other command runs inside the image (chroot) when the "
              "image holds it, else is refused; each command below says which.")

DISPOSITIONS = {"chroot": "run inside the image", "defer": "deferred to first boot",
                "refuse": "refused"}


def render_plans(plans: list[PhasePlan], host: Host) -> str:
    """Each phase's changes with their diffs; on an image tree, what becomes of each
    command (Host.command_disposition)."""
    lines = [IMAGE_TREE.format(root=host.root)] if host.image else []
    for plan in plans:
        if plan.empty:
            lines.append(f"{plan.phase}: no changes")
            continue
        lines.append(f"{plan.phase}: {len(plan.changes)} change(s)")
        lines += [f"  * {note}" for note in plan.notes]
        for change in plan.changes:
            lines.append(f"  ~ {change.summary}")
            if change.argv and host.image:
                how, why = host.command_disposition(change.argv)
                lines.append(f"    [{DISPOSITIONS[how]}: {why}]")
            lines += [f"    {line}" for line in change.diff.splitlines()]
    return "\n".join(lines)


OUTCOMES = {
    "applied": "applied {changes} change(s)",
    "up-to-date": "up to date, nothing to apply",
    "skipped": "skipped",
    "failed": "FAILED {reason}",
    "pending": "not run",
}


def render_outcomes(result: RunResult) -> str:
    """One line per phase: what the run did with it."""
    lines = []
    for o in result.outcomes:
        detail = OUTCOMES[o.outcome].format(changes=o.changes, reason=o.reason)
        tail = f": {o.message}" if o.message and o.outcome != "up-to-date" else ""
        lines.append(f"{o.phase:<8} {detail}{tail}")
    if result.outcomes and all(o.outcome == "up-to-date" for o in result.outcomes):
        lines.append("nothing to do: every phase is up to date")
    return "\n".join(lines)
