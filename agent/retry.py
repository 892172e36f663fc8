"""The one retry helper: jittered exponential backoff for temporary errors."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from agent.errors import AgentError
from agent.recordtype import record

T = TypeVar("T")


@record(frozen=True)
class Backoff:
    """Full-jitter exponential backoff (delay drawn from [0, min(cap, base * 2**n)]).

    Full jitter keeps a fleet of agents that failed together from retrying together.
    """

    base: float = 1.0
    cap: float = 60.0
    attempts: int = 5

    def delay(self, attempt: int, rng: random.Random | None = None, *,
              at_least: float = 0.0) -> float:
        """A pause drawn from [0, ceiling]: the attempt's exponential ceiling, or
        `at_least` when that is higher (e.g. how long the server has been down)."""
        ceiling = max(min(self.cap, self.base * (2 ** attempt)), at_least)
        return (rng or random).uniform(0, ceiling)


def retry(
    call: Callable[[], T],
    backoff: Backoff,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[AgentError, int, float], None] | None = None,
    rng: random.Random | None = None,
    ceiling: Callable[[], float] | None = None,
) -> T:
    """Call until it succeeds, a permanent error is raised, or attempts run out.

    Only `AgentError`s with `temporary=True` are retried; the last one is re-raised.
    A delay the error carries (`retry_after`, e.g. from HTTP Retry-After) is honoured as
    a floor under the jittered delay, capped at `backoff.cap`. `ceiling`, asked before
    each pause, may raise the pause's ceiling above the attempt's (Backoff.delay's
    `at_least`).
    """
    for attempt in range(backoff.attempts):
        try:
            return call()
        except AgentError as err:
            if not err.temporary or attempt == backoff.attempts - 1:
                raise
            pause = backoff.delay(attempt, rng,
                                  at_least=ceiling() if ceiling is not None else 0.0)
            if err.retry_after is not None:
                pause = max(pause, min(err.retry_after, backoff.cap))
            if on_retry is not None:
                on_retry(err, attempt + 1, pause)
            sleep(pause)
    raise AssertionError("unreachable: attempts must be at least 1")
