"""The areas in the order they run, and the run itself: every area's checks against a
read-only view of the host, with the exit status they add up to."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import field
from typing import Any

from agent.doctor import config, ipam, journal, management
from agent.doctor.areas import AFTER_PHASES, BEFORE_PHASES
from agent.host import Host, ReadOnlyHostError
from agent.phases import registry
from agent.phases.base import Phase
from agent.phases.checks import Check, Doctor, log
from agent.recordtype import record

EXIT_PASS, EXIT_FAIL, EXIT_NOT_RUN = 0, 1, 2
FORMAT = 1
"""Version of the --json document (docs/doctor.md)."""


@record(frozen=True)
class Area:
    name: str
    checks: Callable[[Doctor], Iterator[Check]]


OWN = {"config": config.checks, "management": management.checks, "ipam": ipam.checks,
       "journal": journal.checks}
"""The doctor's own areas (agent.doctor.areas orders them around the phases')."""


def areas(phases: list[Phase] | None = None) -> list[Area]:
    """Every area in the order they run: the doctor's own, and each phase's checks (what
    the phase exports, `Phase.doctor_checks`) in pipeline order. Later areas use what
    earlier ones found (the configuration, the Machine), so every area runs even when
    only one is shown."""
    listed = phases if phases is not None else registry.load()
    return ([Area(name, OWN[name]) for name in BEFORE_PHASES]
            + [Area(p.name, p.doctor_checks) for p in listed]
            + [Area(name, OWN[name]) for name in AFTER_PHASES])


@record
class Diagnosis:
    checks: list[Check] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Why some checks could not run at all (a bug in a check): exit status 2."""

    @property
    def exit_code(self) -> int:
        if self.errors:
            return EXIT_NOT_RUN
        return EXIT_FAIL if any(c.status == "fail" for c in self.checks) else EXIT_PASS

    def document(self) -> dict[str, Any]:
        counts = {s: sum(1 for c in self.checks if c.status == s)
                  for s in ("pass", "warn", "fail")}
        return {"format": FORMAT, "exitCode": self.exit_code, "summary": counts,
                "errors": self.errors, "checks": [c.as_dict() for c in self.checks]}


def diagnose(host: Host, files: Iterable[str] = (), phases: Iterable[str] = (), *,
             listed: list[Phase] | None = None) -> Diagnosis:
    """Run every area against `host.read_only_view()`; keep the checks of `phases`
    (default: all). `listed`: the phases (default: the registry's)."""
    wanted = set(phases)
    out = Diagnosis()
    scratch = tempfile.mkdtemp(prefix="machine-agent-doctor-")
    listed = listed if listed is not None else registry.load()
    doctor = Doctor(host.read_only_view(), list(files), Host(scratch),
                    phases=listed)
    try:
        for area in areas(listed):
            found: list[Check] = []
            try:
                found.extend(area.checks(doctor))
            except ReadOnlyHostError as err:
                out.errors.append(f"{area.name}: a check tried to change the node, which "
                                  f"doctor never does (a bug): {err}")
            except Exception as err:  # a bug in a check: say so, keep the others
                log.debug("doctor: %s checks failed", area.name, exc_info=True)
                out.errors.append(f"{area.name}: the checks could not run: "
                                  f"{type(err).__name__}: {err}")
            if not wanted or area.name in wanted:
                out.checks.extend(found)
    finally:
        if doctor.client is not None:
            doctor.client.session.close()
        _remove_tree(scratch)
    if wanted:
        out.errors = [e for e in out.errors if e.split(":", 1)[0] in wanted]
    return out


def _remove_tree(top: str) -> None:
    """Delete the scratch directory by absolute paths (key material lived there)."""
    for base, dirs, files in os.walk(top, topdown=False):
        for name in files:
            os.unlink(os.path.join(base, name))
        for name in dirs:
            os.rmdir(os.path.join(base, name))
    os.rmdir(top)


def render_text(diagnosis: Diagnosis) -> str:
    """One line per check, grouped by phase in pipeline order, then a summary."""
    lines = [c.line() for c in diagnosis.checks]
    lines += [f"ERROR {e}" for e in diagnosis.errors]
    doc = diagnosis.document()["summary"]
    lines.append(f"{doc['pass']} passed, {doc['warn']} warning(s), {doc['fail']} failed"
                 + (f", {len(diagnosis.errors)} area(s) could not run"
                    if diagnosis.errors else ""))
    return "\n".join(lines)
