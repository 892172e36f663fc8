"""A recording systemd-run for tests of commands the agent runs outside its unit's
sandbox (agent.host.OUTSIDE_SANDBOX_ENV): no systemd runs here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCRIPT = """#!{python}
# Records its argument list, then runs the command after `--` with only the --setenv=
# variables (a transient service starts from the manager's environment, not the
# caller's; NAME alone takes the caller's value of NAME), passing stdin/stdout/stderr
# and the exit status through as `systemd-run --wait --pipe` does.
import json, os, sys
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
cut = args.index("--")
env = {{}}
for arg in args[:cut]:
    if arg.startswith("--setenv="):
        name, sep, value = arg[len("--setenv="):].partition("=")
        if sep or name in os.environ:
            env[name] = value if sep else os.environ[name]
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
