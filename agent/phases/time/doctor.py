"""Time: the daemon's file as the time phase renders it, every NTP server asked directly
(offset, stratum, delay), and the clock synchronised within spec.time.maxOffset — the
time phase's own queries, each made once (doctor never waits for the gate)."""

from __future__ import annotations

from collections.abc import Iterator

from agent.errors import AgentError
from agent.phases.base import Phase
from agent.phases.checks import Check, Doctor, Status
from agent.phases.time.clock import clock_state
from agent.phases.time.gate import opens
from agent.phases.time.ntpcheck import QUERY_TIMEOUT, check_servers, format_seconds

PHASE = "time"


def checks(phase: Phase, doctor: Doctor) -> Iterator[Check]:
    """`phase` is the time phase, given by it: its plan is compared with the node."""
    if doctor.config is None:
        return
    spec = doctor.config.spec.time
    if not spec.servers:
        yield Check(PHASE, "servers", "pass", "no servers in spec.time: the image's time "
                    "configuration is left alone")
        return
    try:
        plan = phase.plan(doctor.phase_context())
    except AgentError as err:
        yield Check(PHASE, "config", "fail", f"cannot plan: {err.message}", err.hint or "")
    else:
        changes = [c.summary for c in plan.changes]
        yield (Check(PHASE, "config", "pass", f"{spec.renderer} configured as planned")
               if not changes else
               Check(PHASE, "config", "warn", "differs from the plan: " + "; ".join(changes),
                     "run `machine-agent run --only time`", {"changes": changes}))
    results = check_servers(spec.servers, min(QUERY_TIMEOUT, float(spec.sync_timeout)))
    for result in results:
        yield Check(PHASE, f"server:{result.server}", "pass" if result.reachable else "fail",
                    result.summary(),
                    "" if result.reachable else
                    "check the server's address and that it answers NTP (UDP) from this node",
                    result.as_dict())
    try:
        state = clock_state(doctor.host, spec, results)
    except AgentError as err:
        yield Check(PHASE, "clock", "fail", err.message, err.hint or "")
        return
    limit = float(spec.max_offset)
    details = {"synchronised": state.synchronised, "offset": state.offset,
               "maxOffset": limit, "reference": state.reference, "stratum": state.stratum}
    if opens(state, limit):
        yield Check(PHASE, "clock", "pass", f"synchronised: {state.describe()}, within "
                    f"{format_seconds(limit).lstrip('+')}", details=details)
    else:
        # spec.time.onTimeout: warn lets join go on with the clock as it is.
        status: Status = "fail" if spec.on_timeout == "fail" else "warn"
        yield Check(PHASE, "clock", status, f"not synchronised within "
                    f"{format_seconds(limit).lstrip('+')}: {state.describe()}",
                    "check that the NTP servers answer (see the server checks) and that "
                    f"{spec.renderer} runs", details)
