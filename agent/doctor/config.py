"""Configuration: the sources found (with origins) and the merged document valid."""

from __future__ import annotations

import os
from collections.abc import Iterator

from agent.config.sources.chain import default_sources
from agent.config.sources.files import BAKED_FILE, DROP_IN_DIR
from agent.errors import AgentError, ConfigError
from agent.phases.checks import Check, Doctor
from agent.session import load
from agent.state import Journal

PHASE = "config"


def checks(doctor: Doctor) -> Iterator[Check]:
    host = doctor.host
    found = [BAKED_FILE] if host.exists(BAKED_FILE) else []
    found += [f"{DROP_IN_DIR}/{n}" for n in host.list_dir(DROP_IN_DIR)
              if n.endswith((".yaml", ".yml"))]
    extra = [os.path.abspath(f) for f in doctor.files]
    found += extra
    yield Check(PHASE, "sources",
                "pass" if found else "warn",
                f"read {', '.join(found)}" if found else
                f"no {BAKED_FILE} nor drop-ins in {DROP_IN_DIR}: built-in defaults only",
                "" if found else f"bake the node's AgentConfig into {BAKED_FILE}",
                {"files": found})
    try:
        doctor.loaded = load(host, default_sources(extra))
    except ConfigError as err:
        problems = [str(e) for e in err.errors]
        yield Check(PHASE, "valid", "fail",
                    f"{len(problems)} error(s): " + "; ".join(problems),
                    "fix each field named (`machine-agent config validate FILE` checks a "
                    "file offline)", {"errors": problems})
    else:
        origins = sorted(set(doctor.loaded.origins.values.values()))
        yield Check(PHASE, "valid", "pass",
                    f"AgentConfig valid; values from {', '.join(origins) or 'defaults only'}",
                    details={"origins": origins})
    # The journal is read here once for every later area (its own checks are last).
    try:
        doctor.journal = Journal.load(host)
    except AgentError:  # reported by the journal area; the others plan without it
        doctor.journal = None
