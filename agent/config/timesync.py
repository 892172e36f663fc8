"""`spec.time`: NTP sources and the synchronisation gate before join."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from agent.config import checks
from agent.config.fields import Duration, setting


@dataclass(frozen=True)
class NTPSource:
    SCALAR_FIELD: ClassVar[str] = "host"

    host: str = setting("Host name or address of the server.", check=checks.host_name)
    port: int | None = setting("UDP port, when not 123.", default=None, check=checks.port)
    iburst: bool = setting("Send a burst of requests at start for a fast first sync.",
                           default=True)
    pool: bool = setting("The name is a pool of servers (chrony `pool`).", default=False)


@dataclass(frozen=True)
class TimeSpec:
    servers: list[NTPSource] = setting(
        "NTP servers or pools: a host name, or {host, port, iburst, pool}.", factory=list)
    max_offset: Duration = setting("Largest clock offset that opens the gate to join.",
                                   default=Duration(0.1), check=checks.positive)
    sync_timeout: Duration = setting("How long to wait for synchronisation.",
                                     default=Duration(300), check=checks.positive)
    on_timeout: Literal["fail", "warn"] = setting(
        "When synchronisation times out: hold the join (fail) or go on with a warning.",
        default="fail")
