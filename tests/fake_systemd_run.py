"""A recording systemd-run for tests of commands the agent runs outside its unit's
sandbox (agent.host.OUTSIDE_SANDBOX_ENV): no systemd runs here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCRIPT = """#!{python}
# Records its argument list, then runs the command after `--` with the --setenv=
# variables, passing stdin/stdout/stderr and the exit status through as
# `systemd-run --wait --pipe` does.
import json, os, sys
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
cut = args.index("--")
env = dict(os.environ)
env.update(a.split("=", 1)[1].split("=", 1) for a in args[:cut] if a.startswith("--setenv="))
os.execve(args[cut + 1], args[cut + 1:], env)
"""


def install(bin_dir: Path) -> Path:
    """Put systemd-run into bin_dir; returns the file each call's arguments go to."""
    log = bin_dir / "systemd-run.calls"
    fake = bin_dir / "systemd-run"
    fake.write_text(SCRIPT.format(python=sys.executable, log=str(log)))
    fake.chmod(0o755)
    return log


def calls(log: Path) -> list[list[str]]:
    """The argument list of each call so far."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
