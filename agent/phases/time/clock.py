"""The clock as the time daemon sees it (the gate and `doctor` read it)."""

from __future__ import annotations

from agent.config.timesync import TimeSpec
from agent.host import Host
from agent.phases.time import chronyc
from agent.phases.time.gate import ClockState
from agent.phases.time.ntpcheck import ServerCheck


def clock_state(host: Host, spec: TimeSpec, checks: list[ServerCheck]) -> ClockState:
    """The time daemon's view of the clock, read once (the gate and `doctor` use it)."""
    if spec.renderer == "chrony":
        t = chronyc.read_tracking(host, spec.chrony)
        return ClockState(t.synchronised, t.offset, t.reference, t.stratum, t.leap)
    # timesyncd reports only whether it is synchronised; the offset is the one measured
    # against the first reachable server.
    answer = host.run(["timedatectl", "show", "--property=NTPSynchronized", "--value"],
                      timeout=chronyc.COMMAND_TIMEOUT, check=False, mutates=False)
    synced = answer.ok and answer.stdout.strip() == "yes"
    status = "synchronised" if synced else "Not synchronised"
    best = next((c for c in checks if c.reachable), None)
    if best is None:
        return ClockState(synced, None, status=status)
    return ClockState(synced, best.offset, best.server, best.stratum or 0, status)
