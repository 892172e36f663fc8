"""A changed AgentConfig on a running node: the Machine's ConfigMap or Secret was edited
(or its annotation names another one).

The new configuration is loaded like at boot (local sources, the object on top) and
validated; an invalid one is refused whole and the running one stays. A valid one is
planned and applied by the orchestrator for the phases in spec.lifecycle.reconfigure
only (network, time: join is never run again on a joined node, and cni follows from the
join). Each phase applies as it does at boot (the network phase tries the change and
rolls back to its snapshot when the node loses its gateway or management endpoint);
when a phase fails with the new configuration, the previous configuration is applied
again for it, and the phase's condition says the change was refused and why.
The outcome is the condition `AgentConfigApplied`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from agent.errors import ConfigError, Reason
from agent.host import Host
from agent.kube.machine import ManagementSource
from agent.orchestrator import Orchestrator
from agent.session import Session

log = logging.getLogger(__name__)

CONDITION = "AgentConfigApplied"


def reconfigure(host: Host, session: Session, source: ManagementSource | None,
                orchestrator_for: Callable[[Session], Orchestrator],
                current: Orchestrator) -> tuple[Session, Orchestrator]:
    """Apply `source` (the Machine's configuration as it is now); the session and
    orchestrator to keep serving with."""
    machine = session.machine
    if machine is None or source == machine.config:
        return session, current
    origin = source.origin if source is not None else "the Machine (annotation removed)"
    try:
        new = session.with_machine_config(host, source)
    except ConfigError as err:
        log.error("the changed configuration from %s is refused; the running one "
                  "stays: %s", origin, err)
        current.conditions.set(CONDITION, "False", Reason.ConfigInvalid,
                               f"{origin}: {err}")
        _publish(current)
        return session, current
    names = [n for n in new.loaded.config.spec.lifecycle.reconfigure
             if n not in new.loaded.config.spec.skip_phases]
    log.info("the configuration from %s changed: planning %s again", origin,
             ", ".join(names) or "nothing (spec.lifecycle.reconfigure is empty)")
    orchestrator = orchestrator_for(new)
    result = orchestrator.run(only=names)
    failed = [o for o in result.outcomes if o.outcome == "failed"]
    if not failed:
        orchestrator.conditions.set(CONDITION, "True", Reason.Reconfigured,
                                    f"{origin} applied to {', '.join(names) or 'no phase'}")
        _publish(orchestrator)
        return new, orchestrator
    # Back to what ran before, for the phases that refused the change.
    log.warning("the change from %s failed in %s; applying the previous configuration "
                "again", origin, ", ".join(o.phase for o in failed))
    back = orchestrator_for(session)
    back.run(only=[o.phase for o in failed])
    for outcome in failed:
        phase = next(p for p in back.phases if p.name == outcome.phase)
        back.conditions.set(phase.condition, "False", Reason(outcome.reason),
                            f"the change from {origin} was refused and rolled back: "
                            f"{outcome.message}")
    back.conditions.set(CONDITION, "False", Reason(failed[0].reason),
                        f"{origin}: {failed[0].phase}: {failed[0].message}")
    _publish(back)
    # The session keeps the old configuration but remembers the new object as seen, so
    # the same content is not tried again until it changes.
    seen = Session(session.loaded, replace(machine, config=source), session.client,
                   session.local_sources)
    return seen, back


def _publish(orchestrator: Orchestrator) -> None:
    for reporter in orchestrator.reporters:
        reporter.publish(orchestrator.conditions.all(), True)
