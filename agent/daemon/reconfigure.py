"""A changed AgentConfig on a running node: the Machine's ConfigMap or Secret was edited
(or its annotation names another one).

On a node that has not bootstrapped (`bootstrapped` is False: join failed for good, or
the configuration was refused at start), the daemon runs the whole bootstrap again with
the new configuration instead (agent.daemon.service), and `applied` says how it went.
What follows is for a bootstrapped node.

The new configuration is loaded like at boot (local sources, the object on top) and
validated; an invalid one is refused whole and the running one stays. A valid one is
planned and applied by the orchestrator for the phases in spec.lifecycle.reconfigure
only (by default every phase that can be: network, time, join, where join on a joined
node only keeps the kubelet's extra flags and spec.join.files, kubeadm never runs again;
cni follows from the join). Each phase applies as it does at boot (the
network phase tries the change and rolls back to its snapshot when the node loses its
gateway or management endpoint); when a phase fails with the new configuration, the
previous configuration is applied again for it, and the phase's condition says it runs
the previous configuration and why the change was refused. The outcome is the condition
`AgentConfigApplied`; the summary condition (the readiness gate) is only recomputed once
the change has stayed or been rolled back, so a refused change does not flap it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from agent.errors import ConfigError, Reason
from agent.host import Host
from agent.kube.machine_config import ManagementSource
from agent.orchestrator import Orchestrator, RunResult
from agent.phases.registry import reconfigurable
from agent.report import SUMMARY
from agent.session import Session

log = logging.getLogger(__name__)

CONDITION = "AgentConfigApplied"


def source_name(source: ManagementSource | None) -> str:
    return source.label if source is not None else "the Machine (annotation removed)"


def bootstrapped(orchestrator: Orchestrator) -> bool:
    """Whether the node has joined (join is never redone then), or finished its
    bootstrap without a join (spec.skipPhases)."""
    join = orchestrator.journal.record("join")
    return (join is not None and join.state == "completed") or \
        orchestrator.conditions.get(SUMMARY).status == "True"


def applied(orchestrator: Orchestrator, changed: str, result: RunResult) -> None:
    """Set AgentConfigApplied after the whole bootstrap ran again for a change from
    `changed`: True only when it completed with it."""
    done = ", ".join(f"{o.phase} {o.outcome}" for o in result.outcomes)
    failed = next((o for o in result.outcomes if o.outcome == "failed"), None)
    if failed is None:
        orchestrator.conditions.set(CONDITION, "True", Reason.Reconfigured,
                                    f"{changed}: the bootstrap ran again with it and "
                                    f"completed ({done})")
    else:
        orchestrator.conditions.set(CONDITION, "False", Reason(failed.reason),
                                    f"{changed}: the bootstrap ran again with it and "
                                    f"failed in {failed.phase}: {failed.message}")


def reconfigure(host: Host, session: Session, source: ManagementSource | None,
                orchestrator_for: Callable[[Session], Orchestrator],
                current: Orchestrator) -> tuple[Session, Orchestrator]:
    """Apply `source` (the Machine's configuration as it is now); the session and
    orchestrator to keep serving with."""
    machine = session.machine
    if machine is None or source == machine.config:
        return session, current
    origin = source_name(source)
    try:
        new = session.with_machine_config(host, source)
    except ConfigError as err:
        log.error("the changed configuration from %s is refused; the running one "
                  "stays: %s", origin, err)
        current.conditions.set(CONDITION, "False", Reason.ConfigInvalid,
                               f"{origin}: {err}")
        _publish(current)
        return session, current
    orchestrator = orchestrator_for(new)
    names = reconfigurable(new.loaded.config, orchestrator.phases)
    log.info("the configuration from %s changed: planning %s again", origin,
             ", ".join(names) or "nothing (spec.lifecycle.reconfigure is empty)")
    # A trial: the summary condition (the Machine's readiness gate) is not recomputed
    # until the change has stayed or been rolled back, so a refused change never flips
    # NodeBootstrapped on a working node.
    result = orchestrator.run(only=names, summarize=False)
    failed = [o for o in result.outcomes if o.outcome == "failed"]
    if not failed:
        orchestrator.conditions.set(CONDITION, "True", Reason.Reconfigured,
                                    f"{origin} applied to {', '.join(names) or 'no phase'}")
        orchestrator.summarize()
        return new, orchestrator
    # Back to what ran before, for the phases that refused the change.
    log.warning("the change from %s failed in %s; applying the previous configuration "
                "again", origin, ", ".join(o.phase for o in failed))
    back = orchestrator_for(session)
    restored = back.run(only=[o.phase for o in failed], summarize=False)
    for outcome in failed:
        phase = next(p for p in back.phases if p.name == outcome.phase)
        kept = back.conditions.get(phase.condition)
        if kept.status == "True":  # the previous configuration is in force again
            back.conditions.set(phase.condition, "True", Reason(kept.reason),
                                f"{kept.message} (the change from {origin} was refused "
                                f"and rolled back: {outcome.message})")
    if any(o.outcome == "failed" for o in restored.outcomes):
        log.error("the previous configuration failed too: the node is degraded")
    back.conditions.set(CONDITION, "False", Reason(failed[0].reason),
                        f"{origin}: {failed[0].phase}: {failed[0].message}")
    back.summarize()
    # The session keeps the old configuration but remembers the new object as seen, so
    # the same content is not tried again until it changes.
    seen = Session(session.loaded, replace(machine, config=source), session.client,
                   session.local_sources)
    return seen, back


def _publish(orchestrator: Orchestrator) -> None:
    for reporter in orchestrator.reporters:
        reporter.publish(orchestrator.conditions.all(), True)
