"""Asking each configured server directly (ntplib), before relying on it.

The answer says, per server, whether it is reachable and its stratum, the local clock's
offset from it and the round-trip delay, so an unreachable server is named in the
condition instead of the join failing later with an opaque TLS error.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any

from agent.config.timesync import NTPSource
from agent.recordtype import record

QUERY_TIMEOUT = 2.0
"""Seconds to wait for one server's answer. Servers are asked in parallel."""


@record(frozen=True)
class ServerCheck:
    server: str
    reachable: bool
    stratum: int | None = None
    offset: float | None = None
    """Seconds the local clock is ahead of the server (negative: behind)."""
    delay: float | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def summary(self) -> str:
        if not self.reachable:
            return f"{self.server} unreachable ({self.error})"
        return (f"{self.server} stratum {self.stratum}, offset {format_seconds(self.offset)}, "
                f"delay {format_seconds(self.delay)}")


def check_server(source: NTPSource, timeout: float = QUERY_TIMEOUT) -> ServerCheck:
    import ntplib  # lazily: start-up time is measured

    try:
        answer = ntplib.NTPClient().request(source.host, version=4,
                                            port=source.port or "ntp", timeout=timeout)
    except ntplib.NTPException as err:  # no answer in time, or a malformed one
        return ServerCheck(source.address, False, error=str(err).rstrip("."))
    except OSError as err:  # the name does not resolve, no route, refused
        return ServerCheck(source.address, False, error=err.strerror or str(err))
    if answer.stratum == 0 or answer.leap == 3:
        # A kiss-o'-death or an unsynchronised server (RFC 5905, 7.3): not a time source.
        return ServerCheck(source.address, False, stratum=answer.stratum,
                           error="server is not synchronised (leap 3 / stratum 0)")
    # ntplib's offset is how far the server is ahead of us; ours is the other way round.
    return ServerCheck(source.address, True, stratum=answer.stratum, offset=-answer.offset,
                       delay=answer.delay)


def check_servers(sources: list[NTPSource],
                  timeout: float = QUERY_TIMEOUT) -> list[ServerCheck]:
    """Every source checked, in parallel, in the configured order."""
    if not sources:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(sources))) as pool:
        return list(pool.map(lambda s: check_server(s, timeout), sources))


def format_seconds(value: float | None) -> str:
    """An offset or delay for people: `+1.2ms`, `-350µs`, `+2.5s`."""
    if value is None:
        return "unknown"
    size = abs(value)
    if size == 0:
        return "0s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if size >= scale:
            return f"{value / scale:+.3g}{unit}"
    return f"{value * 1e9:+.3g}ns"
