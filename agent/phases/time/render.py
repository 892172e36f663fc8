"""Pure renderers: `spec.time` into chrony's or timesyncd's configuration file.

Values are validated before they get here (agent/config/timesync.py); the templates only
lay them out. Which renderer runs is chosen by `spec.time.renderer`, never by probing.
"""

from __future__ import annotations

from typing import Any

from agent import templating
from agent.config.timesync import MakeStep, NTPSource, TimeSpec
from agent.recordtype import record


@record(frozen=True)
class RenderedFile:
    path: str
    content: str


def render(spec: TimeSpec) -> RenderedFile:
    """The one file the configured renderer writes, at its system path."""
    if spec.renderer == "timesyncd":
        return RenderedFile(spec.timesyncd.drop_in, render_timesyncd(spec))
    if spec.chrony.target == "dropin":
        return RenderedFile(spec.chrony.sources_file, render_chrony_sources(spec))
    return RenderedFile(spec.chrony.config_file, render_chrony_conf(spec))


def chrony_source_line(spec: TimeSpec, source: NTPSource) -> str:
    """`server HOST [port N] [iburst] [nts] [minpoll N] [maxpoll N]` (chrony.conf(5))."""
    words = ["pool" if source.pool else "server", source.host]
    if source.port is not None:
        words += ["port", str(source.port)]
    if source.iburst:
        words.append("iburst")
    if spec.nts_for(source):
        words.append("nts")
    if source.minpoll is not None:
        words += ["minpoll", str(source.minpoll)]
    if source.maxpoll is not None:
        words += ["maxpoll", str(source.maxpoll)]
    return " ".join(words)


MIN_SOURCES_FROM = 3
"""With this many servers, chronyd waits for two that agree before it sets the clock."""


def render_chrony_conf(spec: TimeSpec) -> str:
    step = spec.makestep or MakeStep()
    # Without it, chronyd steps the clock to whichever server answers first: one server
    # an hour off among good ones won the race and the gate opened on its time
    # (tests/integration/time/test_time_faults.py). With fewer servers there is no
    # majority to wait for, and a dead one would hold the clock forever.
    min_sources = 2 if len(spec.servers) >= MIN_SOURCES_FROM else None
    return _template("chrony.conf.j2",
                     source_lines=[chrony_source_line(spec, s) for s in spec.servers],
                     step_threshold=f"{float(step.threshold):g}", step_limit=step.limit,
                     min_sources=min_sources, chrony=spec.chrony,
                     any_nts=any(spec.nts_for(s) for s in spec.servers))


def render_chrony_sources(spec: TimeSpec) -> str:
    return _template("chrony.sources.j2",
                     source_lines=[chrony_source_line(spec, s) for s in spec.servers])


def render_timesyncd(spec: TimeSpec) -> str:
    return _template("timesyncd.conf.j2", hosts=[s.host for s in spec.servers])


def _template(name: str, **values: Any) -> str:
    return templating.render(f"time/{name}", **values)
