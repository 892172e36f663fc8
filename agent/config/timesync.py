"""`spec.time`: NTP sources, how they are written (chrony or timesyncd), and the gate
that holds the join until the clock is synchronised."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Literal

from agent.config import checks
from agent.config.fields import Duration, setting
from agent.recordtype import record

POLL_RANGE = (-6, 24)
"""chrony.conf(5), `server`: minpoll and maxpoll are log2 seconds from -6 to 24."""

Problem = tuple[str, str, str | None]


def poll_exponent(value: int) -> str | None:
    low, high = POLL_RANGE
    if low <= value <= high:
        return None
    return f"{value} is not a poll interval exponent ({low}..{high}, log2 of seconds)"


def step_limit(value: int) -> str | None:
    if value == -1 or value >= 1:
        return None
    return f"{value} is not a step limit (a number of updates, at least 1, or -1: no limit)"


@record(frozen=True)
class NTPSource:
    SCALAR_FIELD: ClassVar[str] = "host"

    host: str = setting("Host name or address of the server.", check=checks.host_name)
    port: int | None = setting("UDP port, when not 123 (chrony only).", default=None,
                               check=checks.port)
    iburst: bool = setting("Send a burst of requests at start for a fast first sync "
                           "(chrony only; timesyncd has no such option).", default=True)
    pool: bool = setting("The name is a pool of servers (chrony `pool`).", default=False)
    nts: bool | None = setting("Authenticate with NTS (chrony only); unset: spec.time.nts.",
                               default=None)
    minpoll: int | None = setting("Shortest poll interval, log2 seconds (chrony only).",
                                  default=None, check=poll_exponent)
    maxpoll: int | None = setting("Longest poll interval, log2 seconds (chrony only).",
                                  default=None, check=poll_exponent)

    @property
    def address(self) -> str:
        """How the server is named in messages: host, with the port when not 123."""
        return checks.join_host_port(self.host, self.port) if self.port else self.host

    def validate(self) -> Iterator[Problem]:
        if self.minpoll is not None and self.maxpoll is not None \
                and self.minpoll > self.maxpoll:
            yield ("maxpoll", f"maxpoll {self.maxpoll} is below minpoll {self.minpoll}",
                   "make maxpoll at least minpoll")


@record(frozen=True)
class MakeStep:
    threshold: Duration = setting("Step the clock when it is off by more than this...",
                                  default=Duration(1), check=checks.positive)
    limit: int = setting("...during the first this many updates (-1: at any update).",
                         default=3, check=step_limit)


@record(frozen=True)
class ChronySettings:
    target: Literal["main", "dropin"] = setting(
        "Write the whole chrony.conf (main: the agent owns every source) or only a "
        "sources.d drop-in next to the image's configuration (dropin).", default="main")
    config_file: str = setting("chrony's main configuration file.",
                               default="/etc/chrony/chrony.conf", check=checks.absolute_path)
    sources_file: str = setting(
        "The drop-in for target dropin; chrony reads `*.sources` files in its sourcedir.",
        default="/etc/chrony/sources.d/machine-agent.sources", check=checks.absolute_path)
    drift_file: str = setting("chrony's drift file (target main).",
                              default="/var/lib/chrony/chrony.drift",
                              check=checks.absolute_path)
    nts_dump_dir: str = setting("Where chrony keeps NTS keys and cookies (target main).",
                                default="/var/lib/chrony", check=checks.absolute_path)
    rtcsync: bool = setting("Let the kernel copy the system time to the RTC (target main).",
                            default=True)
    command_address: str | None = setting(
        "Where chronyc reaches chronyd: a Unix socket path or an IP address (chronyc -h); "
        "unset: chronyc's default.", default=None, check=checks.chronyc_address)
    command_port: int | None = setting("chronyd's UDP command port (chronyc -p); unset: 323.",
                                       default=None, check=checks.port)


@record(frozen=True)
class TimesyncdSettings:
    drop_in: str = setting("The timesyncd drop-in the agent writes.",
                           default="/etc/systemd/timesyncd.conf.d/machine-agent.conf",
                           check=checks.absolute_path)


@record(frozen=True)
class TimeSpec:
    servers: list[NTPSource] = setting(
        "NTP servers or pools: a host name, or {host, port, iburst, pool, nts, minpoll, "
        "maxpoll}. Empty: the image's time configuration is left alone and not gated.",
        factory=list)
    renderer: Literal["chrony", "timesyncd"] = setting(
        "Which time daemon to configure; chosen here, never by probing.", default="chrony")
    nts: bool = setting("Authenticate every source with NTS unless a source says otherwise.",
                        default=False)
    makestep: MakeStep | None = setting(
        "When chronyd may step the clock instead of slewing it; unset: 1s in the first 3 "
        "updates (target main only).", default=None)
    max_offset: Duration = setting("Largest clock offset that opens the gate to join.",
                                   default=Duration(0.1), check=checks.positive)
    sync_timeout: Duration = setting("How long to wait for synchronisation.",
                                     default=Duration(300), check=checks.positive)
    check_interval: Duration = setting("How often the gate asks the time daemon while waiting.",
                                       default=Duration(1), check=checks.positive)
    on_timeout: Literal["fail", "warn"] = setting(
        "When synchronisation times out: hold the join (fail) or go on with a warning.",
        default="fail")
    reload_command: list[str] | None = setting(
        "Command (argv, no shell) that makes the daemon read the new file; unset: "
        "`systemctl restart chrony` (main), `chronyc reload sources` (dropin), "
        "`systemctl restart systemd-timesyncd` (timesyncd).",
        default=None, check=checks.command_word)
    chrony: ChronySettings = setting("Paths and command socket of chrony.",
                                     factory=ChronySettings)
    timesyncd: TimesyncdSettings = setting("Paths of systemd-timesyncd.",
                                           factory=TimesyncdSettings)

    def nts_for(self, source: NTPSource) -> bool:
        return self.nts if source.nts is None else source.nts

    def validate(self) -> Iterator[Problem]:
        if self.reload_command is not None and not self.reload_command:
            yield ("reloadCommand", "is empty", "give a command, or leave it unset")
        if self.renderer == "timesyncd":
            yield from self._timesyncd_limits()
        elif self.chrony.target == "dropin":
            if self.makestep is not None:
                yield ("makestep", "cannot be set with chrony.target dropin",
                       "a sources.d file holds only sources; use target main")
            if not self.chrony.sources_file.endswith(".sources"):
                yield ("chrony.sourcesFile", "must end in .sources",
                       "chrony's sourcedir reads only *.sources files")

    def _timesyncd_limits(self) -> Iterator[Problem]:
        why = "systemd-timesyncd has no such option; use renderer chrony"
        if self.nts:
            yield ("nts", "is not supported by timesyncd", why)
        if self.makestep is not None:
            yield ("makestep", "is not supported by timesyncd", why)
        for i, s in enumerate(self.servers):
            for key, value in (("port", s.port), ("nts", s.nts or None),
                               ("minpoll", s.minpoll), ("maxpoll", s.maxpoll)):
                if value is not None:
                    yield (f"servers[{i}].{key}", "is not supported by timesyncd", why)
        if not self.timesyncd.drop_in.endswith(".conf"):
            yield ("timesyncd.dropIn", "must end in .conf",
                   "timesyncd reads only *.conf drop-ins")
