"""`machine-agent status --wait`: follow this boot's run to its outcome, like `cloud-init
status --wait`, printing each condition as it changes.

It ends with the outcome's exit status (agent.console.status), or EXIT_TIMEOUT (124)
when --timeout passes first (the run goes on), or EXIT_DISABLED (4) at once when the kill
switch is set and this boot has no outcome: systemd will not start the agent, so waiting
could only end in the time-out.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from agent.console.status import EXIT_CODES, read_view, render
from agent.host import Host
from agent.report import SUMMARY

WAIT_POLL = 0.5
"""Seconds between reads of the status file while following a run."""


def wait_for_outcome(host: Host, *, fmt: str = "text", timeout: float,
                     out: Callable[[str], None] | None = None) -> int:
    """Follow the run until its outcome is known; the exit status (module docstring).
    The status file outlives a reboot, so one written in an earlier boot counts as no run
    yet; the daemon also marks it not final as it starts."""
    emit = out or _print
    deadline = host.clock.monotonic() + timeout
    shown: dict[str, tuple[str, str, str]] = {}
    said_waiting = False
    while True:
        view = read_view(host)
        if view.outcome not in ("not-started", "running"):
            break  # an outcome, or the kill switch
        if view.outcome == "running":
            for c in view.conditions:
                now = (c["status"], c["reason"], c["message"])
                if fmt == "text" and c["type"] != SUMMARY and shown.get(c["type"]) != now:
                    emit(progress_line(c))
                shown[c["type"]] = now
        elif fmt == "text" and not said_waiting:
            emit("waiting for the agent to start a run")
            said_waiting = True
        if host.clock.monotonic() >= deadline:
            print(f"machine-agent: no outcome within {timeout:g}s; the run goes on "
                  "(`machine-agent status` shows where it is)", file=sys.stderr)
            view.outcome = "timeout"
            if fmt != "text":
                emit(render(view, fmt))
            return EXIT_CODES["timeout"]
        host.clock.sleep(WAIT_POLL)
    if fmt != "text":
        emit(render(view, fmt))
    elif view.outcome == "disabled":
        print(f"machine-agent: disabled ({view.disabled}): no run will come on this boot",
              file=sys.stderr)
    else:
        for c in view.conditions:  # what changed since the last poll, then the summary
            now = (c["status"], c["reason"], c["message"])
            if c["type"] != SUMMARY and shown.get(c["type"]) != now:
                emit(progress_line(c))
        summary = view.summary
        if summary is not None:
            emit(progress_line(summary))
    return view.exit_code


def progress_line(c: dict[str, str]) -> str:
    """One condition as `--wait` prints it; further lines of its message indented."""
    first, *more = c["message"].splitlines() or [""]
    head = f"{c['type']:<18} {c['status']:<8} {c['reason']:<20} "
    return "\n".join([(head + first).rstrip(), *(" " * len(head) + m for m in more)])


def _print(text: str) -> None:
    print(text, flush=True)

