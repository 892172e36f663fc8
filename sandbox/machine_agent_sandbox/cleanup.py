"""What a sandbox made, written down before it is made, so that it can be undone: by the
sandbox's context manager on the way out (also on Ctrl-C or a failure), or later by
`machine-agent demo --cleanup` for a sandbox kept with --keep or left by a killed demo.

The record is `sandbox.json` in the sandbox's own directory. Processes are stopped only
while their command line still names that directory (a recycled pid is left alone);
namespaces are the sandbox's own, unique names.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from agent.host import Host

PREFIX = "ma-sandbox-"
RECORD = "sandbox.json"
STOP_WAIT = 3.0
"""Seconds a process gets after SIGTERM before SIGKILL."""


@dataclass
class Record:
    owner: int
    """pid of the program that made the sandbox."""
    kept: bool = False
    namespaces: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    pidfiles: list[str] = field(default_factory=list)
    """Files naming daemons that detach (the node's chronyd, started by the agent)."""
    made_by: str = ""
    """The installation (sys.prefix) whose demo made it: `demo --cleanup` removes only
    its own installation's kept sandboxes, never another checkout's or user's."""


class Registry:
    """The sandbox directory and the record of everything to undo."""

    def __init__(self, base: Path, record: Record) -> None:
        self.base = base
        self.record = record
        self.tools = Host(base)
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._hooks: list[Callable[[], None]] = []

    @classmethod
    def create(cls, parent: str | None = None) -> Registry:
        base = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
        registry = cls(base, Record(owner=os.getpid(), made_by=sys.prefix))
        registry.save()
        return registry

    @classmethod
    def load(cls, base: Path) -> Registry:
        doc = json.loads((base / RECORD).read_text())
        return cls(base, Record(**doc))

    @property
    def tag(self) -> str:
        return self.base.name.removeprefix(PREFIX)

    def save(self) -> None:
        tmp = self.base / f".{RECORD}.tmp"
        tmp.write_text(json.dumps(asdict(self.record), indent=1))
        tmp.replace(self.base / RECORD)

    # -- things made ----------------------------------------------------------------------

    def namespace(self, name: str) -> str:
        """Record, then create, a network namespace."""
        self.record.namespaces.append(name)
        self.save()
        self.tools.run(["ip", "netns", "add", name], timeout=10)
        return name

    def spawn(self, argv: Sequence[str], log: Path, *,
              env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start a long-running process in its own session (Ctrl-C reaches only the
        driver, which then stops it), output to `log`; recorded for the undo."""
        with open(log, "ab") as out:
            proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env={**os.environ, **(env or {})})
        self._children[proc.pid] = proc
        self.record.pids.append(proc.pid)
        self.save()
        return proc

    def pidfile(self, path: Path) -> None:
        self.record.pidfiles.append(str(path))
        self.save()

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        """Stop one of the processes started here, now."""
        self._stop(proc.pid)
        with contextlib.suppress(ValueError):
            self.record.pids.remove(proc.pid)
        self.save()

    def on_undo(self, hook: Callable[[], None]) -> None:
        """Run `hook` first when this process undoes the sandbox (the objects made on an
        external API server); not recorded, so a later `--cleanup` does not run it."""
        self._hooks.append(hook)

    def keep(self) -> None:
        self.record.kept = True
        self.save()

    # -- undo -----------------------------------------------------------------------------

    def undo(self) -> None:
        """Undo everything recorded, in reverse dependency order; never raises. Only the
        maker does it while alive (not a process forked from it), or anyone afterwards."""
        if self.record.owner != os.getpid() and Path(f"/proc/{self.record.owner}").exists() \
                and not self.record.kept:
            return
        for hook in reversed(self._hooks):
            with contextlib.suppress(Exception):  # undo never raises; each hook says why
                hook()
        self._hooks.clear()
        for pid in reversed(self.record.pids):
            self._stop(pid)
        for path in self.record.pidfiles:
            with contextlib.suppress(ValueError, OSError):
                self._stop(int(Path(path).read_text().split()[0]))
        for name in reversed(self.record.namespaces):
            self._empty_namespace(name)
            self.tools.run(["ip", "netns", "delete", name], check=False, timeout=10)
        shutil.rmtree(self.base, ignore_errors=True)

    def _empty_namespace(self, name: str) -> None:
        """Stop whatever still runs inside one of our namespaces (what the agent or a
        plugin started there and no record names)."""
        listed = self.tools.run(["ip", "netns", "pids", name], check=False, timeout=10,
                                mutates=False)
        for word in listed.stdout.split():
            with contextlib.suppress(ValueError):
                self._stop(int(word), anywhere=True)

    def _stop(self, pid: int, *, anywhere: bool = False) -> None:
        if not anywhere and not self._ours(pid):
            self._reap(pid, 0)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT
        while self._alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self._reap(pid, STOP_WAIT)

    def _ours(self, pid: int) -> bool:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        return str(self.base).encode() in cmdline

    def _alive(self, pid: int) -> bool:
        child = self._children.get(pid)
        if child is not None:
            return child.poll() is None
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state != "Z"

    def _reap(self, pid: int, timeout: float) -> None:
        child = self._children.pop(pid, None)
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=timeout)


def leftovers(parent: str | None = None, *, kept_by: str | None = None) -> list[Registry]:
    """Sandboxes to clean: those whose maker is gone without keeping them (killed), and
    kept ones made by the installation `kept_by` (sys.prefix; None: kept ones of any)."""
    found = []
    for record in sorted(Path(parent or tempfile.gettempdir()).glob(f"{PREFIX}*/{RECORD}")):
        try:
            registry = Registry.load(record.parent)
        except (OSError, ValueError, TypeError):
            continue
        made = registry.record
        if made.kept:
            if kept_by is None or made.made_by in (kept_by, ""):
                found.append(registry)
        elif not Path(f"/proc/{made.owner}").exists():
            found.append(registry)
    return found


def others_kept(parent: str | None = None, *, kept_by: str) -> list[Registry]:
    """Kept sandboxes another installation made (left alone by `demo --cleanup`)."""
    mine = {r.base for r in leftovers(parent, kept_by=kept_by)}
    return [r for r in leftovers(parent) if r.record.kept and r.base not in mine]
