"""The agent's log lines in a real systemd-journald, started in a private mount namespace
(tmpfs over /run/systemd, /run/log and /var/log/journal: the host's journal is never
touched), then read back with journalctl as an operator would: `-p err` shows the
failure, with the fields PHASE, REASON, MACHINE and ATTEMPT."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[3]
JOURNALD = "/lib/systemd/systemd-journald"

# Runs inside `unshare --mount --propagation private`: every mount dies with it.
SCRIPT = r"""
set -eu
mount -t tmpfs tmpfs /run/systemd
mkdir -p /run/systemd/journal /run/log
mount -t tmpfs tmpfs /run/log
if [ -d /var/log/journal ]; then mount -t tmpfs tmpfs /var/log/journal; fi
{journald} &
journald=$!
trap 'kill $journald; wait $journald || true' EXIT
for _ in $(seq 100); do [ -S /run/systemd/journal/socket ] && break; sleep 0.05; done
{python} {logger} {root}
journalctl --sync 2>/dev/null || sleep 0.5
journalctl -D /run/log/journal SYSLOG_IDENTIFIER=machine-agent -o json --all --no-pager \
    > {out}/all.json
journalctl -D /run/log/journal SYSLOG_IDENTIFIER=machine-agent -p err -o json --all --no-pager \
    > {out}/err.json
"""

LOGGER = r"""
import sys
from pathlib import Path

from agent.config import load_config
from agent.errors import PermanentError, Reason, TemporaryError
from agent.host import Host
from agent.logs import set_context, setup_logging
from agent.orchestrator import Orchestrator
from agent.phases.base import Phase


class Flaky(Phase):
    name, condition, success = "time", "TimeSynchronized", Reason.TimeSynchronized
    tries = 0

    def plan(self, ctx):
        self.tries += 1
        if self.tries == 1:
            raise TemporaryError("chronyd is not answering yet", reason=Reason.CommandTimeout)
        raise PermanentError("servers 192.0.2.123 did not answer:\nno reply within 30s",
                             reason=Reason.TimeNotSynchronized)


setup_logging("journal", "info")
set_context(machine="site-a/worker-0")
host = Host(sys.argv[1])
host.clock.sleep = lambda seconds: None
Orchestrator(load_config(host, []), host, phases=[Flaky()]).run()
import logging
logging.getLogger("agent.test").info("a long command output:\n%s", "x" * 400_000)
"""


@pytest.mark.allow_processes
def test_journalctl_p_err_shows_the_failure_with_its_fields(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    logger = tmp_path / "logger.py"
    logger.write_text(LOGGER)
    script = SCRIPT.format(journald=JOURNALD, python=sys.executable, logger=logger,
                           root=root, out=tmp_path)
    done = subprocess.run([shutil.which("unshare") or "unshare", "--mount",
                           "--propagation", "private", "bash", "-c", script],
                          capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                               "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    errors = [json.loads(x) for x in (tmp_path / "err.json").read_text().splitlines()]
    (error,) = errors
    assert error["PRIORITY"] == "3"
    assert (error["PHASE"], error["REASON"], error["MACHINE"]) == (
        "time", "TimeNotSynchronized", "site-a/worker-0")
    assert "did not answer:\nno reply within 30s" in error["MESSAGE"]
    everything = [json.loads(x) for x in (tmp_path / "all.json").read_text().splitlines()]
    (retry,) = [e for e in everything if e["PRIORITY"] == "4"]
    assert (retry["PHASE"], retry["REASON"], retry["ATTEMPT"]) == ("time", "CommandTimeout", "1")
    # an entry bigger than a datagram (a command's whole output) arrives through a memfd
    (big,) = [e for e in everything if e["MESSAGE"].startswith("a long command output")]
    assert len(big["MESSAGE"]) == len("a long command output:\n") + 400_000
