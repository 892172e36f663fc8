"""Asking chronyd how the clock is doing: `chronyc -n -c tracking` and `sources`, parsed.

The CSV form (`-c`) is used because its fields are fixed and free of units and locale.
Field order as printed by chrony 4.3's client.c (process_cmd_tracking, process_cmd_sources),
checked against the daemon here:

  tracking: refid, name, stratum, ref time, system time, last offset, rms offset,
            frequency, residual freq, skew, root delay, root dispersion,
            update interval, leap status
  sources:  mode, state, name, stratum, poll, reach, last rx, adjusted offset,
            measured offset, error
"""

from __future__ import annotations

from agent.config.timesync import ChronySettings
from agent.errors import AgentError, Reason, TemporaryError
from agent.host import Host
from agent.recordtype import record

COMMAND_TIMEOUT = 5.0
"""Seconds one chronyc call may take; chronyc itself gives up on a dead socket sooner."""


@record(frozen=True)
class Tracking:
    reference: str
    """The selected source's address, or '' when chronyd has none."""
    stratum: int
    offset: float
    """Seconds the system clock is ahead of NTP time (negative: behind)."""
    leap: str
    """`Normal`, `Insert second`, `Delete second` or `Not synchronised`."""

    @property
    def synchronised(self) -> bool:
        return self.leap == "Normal"


@record(frozen=True)
class Source:
    name: str
    state: str
    """chronyc's state column: `*` selected, `+` combined, `?` unreachable, ..."""
    stratum: int
    reach: int
    """The reachability register (8 bits), as chronyc prints it in octal."""


def chronyc_argv(settings: ChronySettings, *command: str) -> list[str]:
    argv = ["chronyc", "-n", "-c"]
    if settings.command_address is not None:
        argv += ["-h", settings.command_address]
    if settings.command_port is not None:
        argv += ["-p", str(settings.command_port)]
    return [*argv, *command]


def parse_tracking(text: str) -> Tracking:
    fields = _first_row(text, 14, "tracking")
    try:
        # chronyd prints how much the clock must be corrected: positive when it is slow.
        correction = float(fields[4])
        stratum = int(fields[2])
    except ValueError as err:
        raise _garbled("tracking", text) from err
    return Tracking(reference=fields[1], stratum=stratum, offset=-correction, leap=fields[13])


def parse_sources(text: str) -> list[Source]:
    sources = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split(",")
        if len(fields) != 10:
            raise _garbled("sources", text)
        try:
            sources.append(Source(name=fields[2], state=fields[1], stratum=int(fields[3]),
                                  reach=int(fields[5], 8)))
        except ValueError as err:
            raise _garbled("sources", text) from err
    return sources


def read_tracking(host: Host, settings: ChronySettings) -> Tracking:
    return parse_tracking(_ask(host, settings, "tracking"))


def read_sources(host: Host, settings: ChronySettings) -> list[Source]:
    return parse_sources(_ask(host, settings, "sources"))


def _ask(host: Host, settings: ChronySettings, command: str) -> str:
    argv = chronyc_argv(settings, command)
    result = host.run(argv, timeout=COMMAND_TIMEOUT, check=False, mutates=False)
    if not result.ok:
        raise TemporaryError(
            f"chronyd did not answer `{' '.join(argv)}`: {result.tail(300)}",
            reason=Reason.TimeNotSynchronized,
            hint="check that chronyd is running and that spec.time.chrony.commandAddress "
                 "names its socket")
    return result.stdout


def _first_row(text: str, count: int, what: str) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    fields = lines[0].split(",") if lines else []
    if len(fields) != count:
        raise _garbled(what, text)
    return fields


def _garbled(what: str, text: str) -> AgentError:
    return AgentError(f"cannot parse `chronyc -c {what}` output: {text[:300]!r}",
                      reason=Reason.InternalError,
                      hint="report it with the chrony version (`chronyd --version`)")
