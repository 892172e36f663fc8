"""The time gate: a bounded wait until the clock is synchronised within the allowed offset.

The gate opens when the time daemon says the clock is synchronised (chrony's leap status
`Normal`) and |offset| is below `maxOffset`. While it waits it reports the current offset
(reason TimeSynchronizing); after `syncTimeout` it gives up and says what it last saw.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.errors import AgentError, Reason
from agent.host import Clock
from agent.phases.base import Progress
from agent.phases.time.ntpcheck import format_seconds
from agent.recordtype import record


@record(frozen=True)
class ClockState:
    synchronised: bool
    """The daemon considers the clock synchronised (chrony: leap status Normal)."""
    offset: float | None
    """Seconds the clock is ahead of NTP time; None when not known."""
    reference: str = ""
    stratum: int = 0
    status: str = ""
    """The daemon's own word for the state, e.g. `Not synchronised`."""

    def describe(self) -> str:
        source = self.reference or "none"
        return (f"offset {format_seconds(self.offset)}, status {self.status or 'unknown'}, "
                f"source {source}")


@record(frozen=True)
class GateOutcome:
    opened: bool
    last: ClockState | None
    """The last state read; None when the daemon never answered."""
    waited: float
    error: str | None = None
    """Why the last read failed, when it did (e.g. chronyd not running)."""


def wait_until_synchronised(
    read: Callable[[], ClockState],
    *,
    max_offset: float,
    timeout: float,
    interval: float,
    clock: Clock,
    progress: Progress,
) -> GateOutcome:
    """Read the clock state every `interval` until the gate opens or `timeout` passes."""
    start = clock.monotonic()
    deadline = start + timeout
    last: ClockState | None = None
    error: str | None = None
    while True:
        try:
            last, error = read(), None
        except AgentError as err:  # e.g. chronyd restarting: not an answer yet
            error = err.message
        now = clock.monotonic()
        if last is not None and error is None and opens(last, max_offset):
            return GateOutcome(True, last, now - start)
        if now >= deadline:
            return GateOutcome(False, last, now - start, error)
        seen = error if error is not None else last.describe() if last else "no answer"
        progress(f"waiting for the clock to synchronise ({seen}; allowed offset "
                 f"{format_seconds(max_offset).lstrip('+')}; {now - start:.0f}s of "
                 f"{timeout:g}s)", Reason.TimeSynchronizing)
        clock.sleep(min(interval, deadline - now))


def opens(state: ClockState, max_offset: float) -> bool:
    return state.synchronised and state.offset is not None and abs(state.offset) < max_offset
