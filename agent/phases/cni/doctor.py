"""CNI: the network configuration lists in spec.cni.confDir parse, and every plugin they
name is an executable in spec.cni.binDir (what the container runtime needs to start a
pod). The cni phase is still a stub on this branch; when it lands, its own check (ADD,
CHECK, DEL against a namespace) is not repeated here: doctor changes nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

from agent.phases.base import Phase
from agent.phases.checks import Check, Doctor

PHASE = "cni"


def checks(phase: Phase, doctor: Doctor) -> Iterator[Check]:
    if doctor.config is None or "cni" in doctor.config.spec.skip_phases:
        return
    spec = doctor.config.spec.cni
    host = doctor.host
    record = doctor.journal.phases.get(PHASE) if doctor.journal else None
    applied = record is not None and record.state == "completed"
    names = [n for n in host.list_dir(spec.conf_dir) if n.endswith((".conflist", ".conf"))]
    if not names:
        yield Check(PHASE, "conflist", "fail" if applied else "warn",
                    f"no network configuration in {spec.conf_dir}"
                    + ("" if applied else " (the cni phase has not completed yet)"),
                    "run `machine-agent run --only cni`")
        return
    # The runtime uses the first file in lexical order (libcni ConfFiles + sort).
    first = f"{spec.conf_dir}/{names[0]}"
    try:
        doc = json.loads(host.read_text(first) or "")
        plugins = doc["plugins"] if names[0].endswith(".conflist") else [doc]
        types = [str(p["type"]) for p in plugins]
        if not isinstance(doc.get("cniVersion"), str) or not types:
            raise ValueError("cniVersion or plugins missing")
    except (ValueError, KeyError, TypeError) as err:
        yield Check(PHASE, "conflist", "fail", f"{first} is not a valid network "
                    f"configuration: {err}", "fix or remove the file; the runtime uses "
                    "the first file in lexical order")
        return
    yield Check(PHASE, "conflist", "pass", f"{first}: network {doc.get('name')!r}, "
                f"cniVersion {doc['cniVersion']}, plugins {', '.join(types)}")
    for kind in dict.fromkeys(types):
        path = f"{spec.bin_dir}/{kind}"
        ok = host.exists(path) and os.access(host.path(path), os.X_OK)
        yield Check(PHASE, f"plugin:{kind}", "pass" if ok else "fail",
                    f"{path} " + ("is executable" if ok else "is missing or not executable"),
                    "" if ok else f"install the {kind} plugin into {spec.bin_dir}")
