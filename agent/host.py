"""The Host port: the one door to side effects (files, commands, services, netlink, clock).

Files are always addressed by their system path (`/etc/chrony/chrony.conf`) and land under
`root`, so a test or an image build points the agent at a temporary tree. Phases never
call `subprocess` or `open()` on system paths themselves; they are handed a Host.

Every side effect is counted. With `crash_after=N` the process kills itself right after
its Nth side effect: the crash harness uses it to prove that a run interrupted anywhere
completes correctly on the next run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import logging
import math
import os
import re
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, TypeVar

from agent.errors import (
    CommandError,
    CommandTimeoutError,
    PermanentError,
    Reason,
    StateError,
)
from agent.hostpath import DEFAULT_READ_LIMIT, read_regular, resolve_in_root
from agent.logs import REDACT, Redactor

if TYPE_CHECKING:
    import socket
    import subprocess

log = logging.getLogger(__name__)
T = TypeVar("T")

OUTPUT_TAIL = 2000
"""Characters of a failed command's output kept in its error and in the journal."""

OUTSIDE_SANDBOX_ENV = "MACHINE_AGENT_OUTSIDE_SANDBOX"
"""Set to `systemd-run` by units/machine-agent.service: commands run with
`sandboxed=False` (the bootstrap data's commands, kubeadm join and reset) then run as
transient services, outside the unit's hardening (its syscall filter, capability bounding
set and mount namespace), as cloud-init would run them. Unset (tests, a shell), they run
as children like every other command."""

PASSED_OUTSIDE = ("PATH", "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY",
                  "HTTPS_PROXY", "NO_PROXY")
"""The agent's own variables a command run outside the sandbox still gets (a transient
service starts from systemd's environment): where programs are, and a site's proxy."""


_TEMP_FILE = re.compile(r"\..+\.[A-Za-z0-9_]{8}\.tmp")
"""How `write_file` names its temp file (tempfile.mkstemp's 8 random characters)."""
ROOT = Path("/")
_HELD: dict[tuple[str, int], int] = {}
"""Lock files held, by thread, with how many times (Host.lock is re-entrant)."""


class LockBusyError(StateError):
    """Another process holds a lock the caller would not wait for."""

    def __init__(self, system_path: str, holder: str) -> None:
        super().__init__(
            f"another command is changing this node ({holder or 'holder unknown'}; lock "
            f"{system_path})",
            hint="wait for it to finish (`machine-agent status --wait`), or run again "
                 "without --no-wait to wait for it", temporary=True)
        self.holder = holder


HOLDER_WAIT = 0.2
"""How long a waiter looks for the holder's name: the holder writes it right after taking
the lock, so a lock taken an instant ago has an empty file."""


def _read_holder(fd: int) -> str:
    """Who holds a lock file, as its holder wrote it (one short line); "" when it wrote
    none within HOLDER_WAIT."""
    deadline = time.monotonic() + HOLDER_WAIT
    while True:
        try:
            text = os.pread(fd, 200, 0).decode(errors="replace")
        except OSError:
            return ""
        first = text.split("\n", 1)[0].strip()
        if first or time.monotonic() >= deadline:
            return first
        time.sleep(0.005)


HOST_ONLY = frozenset({"kubeadm", "kubelet", "ip", "chronyc", "timedatectl", "hwclock",
                       "modprobe", "sysctl", "mount", "reboot"})
"""Programs that act on (or read) the running node's kernel, clock or cluster
membership: never run against an image tree, chrooted or not."""


class ReadOnlyHostError(RuntimeError):
    """A side effect was attempted through a read-only Host (plan, doctor): a bug."""


class Clock:
    """Wall time for records, monotonic time for waits. Tests hand in a fake."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration: float
    timed_out: bool = False
    """Killed at its time-out (`stream` only); the output is what came before."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def tail(self, limit: int = OUTPUT_TAIL) -> str:
        text = (self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr)
        return text.strip()[-limit:]


@dataclass
class EffectLog:
    """Counts side effects; optionally ends the process right after the Nth (crash tests)."""

    crash_after: int | None = None
    count: int = 0
    recent: list[str] = field(default_factory=list)

    def record(self, what: str) -> None:
        self.count += 1
        self.recent = [*self.recent[-49:], what]
        log.debug("effect %d: %s", self.count, what)
        if self.crash_after is not None and self.count >= self.crash_after:
            os.kill(os.getpid(), signal.SIGKILL)


class Host:
    """Real side effects under `root`. `read_only=True` refuses every change."""

    def __init__(
        self,
        root: str | Path = "/",
        *,
        read_only: bool = False,
        clock: Clock | None = None,
        effects: EffectLog | None = None,
        redact: Redactor = REDACT,
        netns: str | None = None,
        env: Mapping[str, str] | None = None,
        image: bool = False,
    ) -> None:
        self.root = Path(root).resolve()
        self.image = image
        """The root is an image tree (the CLI's `--root DIR` without `--netns`): no
        command runs on the host. Each is run in the root (chroot), deferred to the
        node's first boot, or refused: `command_disposition` says which."""
        self.read_only = read_only
        self.clock = clock or Clock()
        self.effects = effects or EffectLog()
        self.redact = redact
        self.netns = netns
        """Network namespace the node's links live in (None: the agent's own)."""
        self.env = dict(env or {})
        """Extra environment for commands (e.g. PATH to site binaries)."""

    def read_only_view(self) -> Host:
        """The same host, refusing changes: what `plan` and `doctor` are handed."""
        return Host(self.root, read_only=True, clock=self.clock, effects=self.effects,
                    redact=self.redact, netns=self.netns, env=self.env, image=self.image)

    # -- files ------------------------------------------------------------------------

    def path(self, system_path: str | PurePosixPath, *, follow_last: bool = True) -> Path:
        """Where a system path lives under the root, its links resolved inside the root
        as the booted node would resolve them (agent/hostpath.py): nothing lands outside
        an image tree. `follow_last=False` leaves the last component's own link (what a
        write or removal replaces). Refuses relative paths and `..`."""
        p = PurePosixPath(system_path)
        if not p.is_absolute():
            raise PermanentError(f"path {str(system_path)!r} is not absolute",
                                 reason=Reason.ConfigInvalid,
                                 hint="give a path starting with /")
        if ".." in p.parts or any("\n" in part or "\0" in part for part in p.parts):
            raise PermanentError(f"path {str(system_path)!r} is not a plain absolute "
                                 "path", reason=Reason.ConfigInvalid,
                                 hint="no '..', newline or NUL in paths")
        if self.root == ROOT:  # the running node: the kernel resolves as it always does
            return self.root.joinpath(*p.parts[1:])
        try:
            return resolve_in_root(self.root, p.parts[1:], follow_last=follow_last)
        except OSError as err:
            raise PermanentError(f"path {system_path} under {self.root}: {err.strerror}",
                                 reason=Reason.StateUnwritable,
                                 hint="fix the links in the tree") from err

    def exists(self, system_path: str) -> bool:
        return self.path(system_path).exists()

    def read_bytes(self, system_path: str, *, limit: int = DEFAULT_READ_LIMIT) -> bytes:
        """A regular file's bytes, refused (UnreadableFileError, an OSError) when it is a
        FIFO, a device or a socket, or holds more than `limit` bytes."""
        return read_regular(self.path(system_path), limit)

    def read_text(self, system_path: str, default: str | None = None, *,
                  limit: int = DEFAULT_READ_LIMIT) -> str | None:
        """The file's text (as `read_bytes`), or `default` when it does not exist."""
        try:
            return self.read_bytes(system_path, limit=limit).decode()
        except FileNotFoundError:
            return default

    def list_dir(self, system_path: str) -> list[str]:
        """Names in a directory, sorted; empty when it does not exist."""
        try:
            return sorted(os.listdir(self.path(system_path)))
        except FileNotFoundError:
            return []

    def write_file(
        self,
        system_path: str,
        data: str | bytes,
        *,
        mode: int = 0o644,
        owner: tuple[int, int] | None = None,
        dir_mode: int = 0o755,
    ) -> None:
        """Atomically replace a file: temp file in the same directory, fsync, rename."""
        self.check_writable(f"write {system_path}")
        target = self.path(system_path, follow_last=False)
        self._make_dirs(target.parent, dir_mode)
        payload = data.encode() if isinstance(data, str) else data
        try:  # a read-only or full file system fails here already
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                       dir=target.parent)
        except OSError as err:
            raise StateError(f"cannot write {system_path}: {err.strerror}") from err
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            if owner is not None:
                os.chown(tmp, *owner)
            os.replace(tmp, target)
        except OSError as err:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise StateError(f"cannot write {system_path}: {err.strerror}") from err
        self._fsync_dir(target.parent)
        self.effects.record(f"write {system_path}")

    def make_dir(self, system_path: str, mode: int = 0o755) -> None:
        self.check_writable(f"mkdir {system_path}")
        target = self.path(system_path)
        if target.is_dir():
            if (target.stat().st_mode & 0o777) != mode:
                os.chmod(target, mode)
                self.effects.record(f"chmod {system_path}")
            return
        self._make_dirs(target, mode)
        self.effects.record(f"mkdir {system_path}")

    def remove(self, system_path: str) -> bool:
        """Remove a file; False when there was none."""
        self.check_writable(f"remove {system_path}")
        try:
            self.path(system_path, follow_last=False).unlink()
        except FileNotFoundError:
            return False
        self.effects.record(f"remove {system_path}")
        return True

    def is_real_dir(self, system_path: str) -> bool:
        """A directory itself, not a link to one."""
        target = self.path(system_path, follow_last=False)
        return not target.is_symlink() and target.is_dir()

    def is_executable(self, system_path: str) -> bool:
        """A regular file the agent may execute (what a runtime needs of a CNI plugin)."""
        target = self.path(system_path)
        return target.is_file() and os.access(target, os.X_OK)

    def make_temp_dir(self, parent: str, prefix: str) -> str:
        """A new private directory under `parent` (a system path), for staging a tree
        on the same file system as its destination so it can be renamed into place."""
        self.check_writable(f"mkdtemp {parent}/{prefix}*")
        base = self.path(parent)
        self._make_dirs(base, 0o755)
        made = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        self.effects.record(f"mkdtemp {parent}/{made.name}")
        return str(PurePosixPath(parent) / made.name)

    def rename(self, source: str, target: str) -> None:
        """Atomically move `source` over `target` (same file system), then fsync the
        target's directory so the rename survives a crash."""
        self.check_writable(f"rename {source} {target}")
        dst = self.path(target, follow_last=False)
        self._make_dirs(dst.parent, 0o755)
        try:
            os.replace(self.path(source, follow_last=False), dst)
        except OSError as err:
            raise StateError(f"cannot move {source} to {target}: {err.strerror}") from err
        self._fsync_dir(dst.parent)
        self.effects.record(f"rename {source} {target}")

    def remove_tree(self, system_path: str) -> bool:
        """Remove a directory and everything in it (never following links), or a file;
        False when there was none."""
        self.check_writable(f"remove tree {system_path}")
        target = self.path(system_path, follow_last=False)
        if target.is_symlink() or target.is_file():  # a link goes, never its target
            os.unlink(target)
            self.effects.record(f"remove {system_path}")
            return True
        if not target.exists():
            return False
        # By absolute path, bottom up (not shutil.rmtree's dir_fd calls): every removal
        # stays visible to the test suite's side-effect guard.
        for here, dirs, files in os.walk(target, topdown=False):
            for name in files:
                os.unlink(os.path.join(here, name))
            for name in dirs:
                sub = os.path.join(here, name)
                if os.path.islink(sub):
                    os.unlink(sub)
                else:
                    os.rmdir(sub)
        os.rmdir(target)
        self.effects.record(f"remove tree {system_path}")
        return True

    def remove_stale_temp_files(self, system_dir: str) -> list[str]:
        """Remove the temp files `write_file` leaves behind when the process is killed
        between creating and renaming one (`.<name>.<8 random>.tmp`, regular files only);
        the names removed. Only safe while no other writer runs: under the node lock."""
        self.check_writable(f"clean temp files in {system_dir}")
        base = self.path(system_dir)
        removed: list[str] = []
        try:
            entries = list(os.scandir(base))
        except (FileNotFoundError, NotADirectoryError):
            return removed
        for entry in entries:
            if _TEMP_FILE.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed.append(entry.name)
                    self.effects.record(f"remove {system_dir.rstrip('/')}/{entry.name}")
        return removed

    def _make_dirs(self, directory: Path, mode: int) -> None:
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=mode)
        except OSError as err:
            raise StateError(f"cannot create {directory}: {err.strerror}") from err

    @staticmethod
    def _fsync_dir(directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def check_writable(self, what: str) -> None:
        """Refuse `what` on a read-only host (plan, doctor): reaching here is a bug."""
        if self.read_only:
            raise ReadOnlyHostError(f"refused on a read-only host: {what}")

    def holds_lock(self, system_path: str) -> bool:
        """Whether this thread holds the lock on `system_path` already."""
        import threading

        return _HELD.get((str(self.path(system_path, follow_last=False)),
                          threading.get_ident()), 0) > 0

    @contextlib.contextmanager
    def lock(self, system_path: str, *, holder: str | None = None,
             on_busy: Callable[[str], bool] | None = None) -> Iterator[None]:
        """An exclusive advisory lock (flock) on a lock file, across processes and threads.

        Re-entrant within a thread (the daemon's reconfiguration may run the bootstrap,
        which takes the node lock again); other threads wait as other processes do.
        `holder` (e.g. "pid 42: machine-agent run") is written into the file while the
        lock is held, so a waiter can name it. When the
        lock is taken, `on_busy(holder_text)` is asked first: True waits for it, False
        raises `LockBusyError` naming the holder. Taking a lock changes nothing a user
        sees, so it is not counted as a side effect.
        """
        import fcntl
        import threading

        target = self.path(system_path, follow_last=False)

        key = (str(target), threading.get_ident())
        if _HELD.get(key, 0) > 0:
            _HELD[key] += 1
            try:
                yield
            finally:
                _HELD[key] -= 1
            return
        self._make_dirs(target.parent, 0o700)
        try:
            # never through a link: its target (any file) would be truncated to the holder
            fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                         0o600)
        except OSError as err:  # a read-only or full state directory: said, not a traceback
            if err.errno == errno.ELOOP:
                raise StateError(f"the lock file {system_path} is a symbolic link; the "
                                 "agent takes locks on regular files only",
                                 hint=f"remove the link {system_path}") from err
            raise StateError(f"cannot write {system_path}: {err.strerror}") from err
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                current = _read_holder(fd)
                if on_busy is not None and not on_busy(current):
                    raise LockBusyError(system_path, current) from None
                fcntl.flock(fd, fcntl.LOCK_EX)
            if holder is not None:
                try:  # written, then cut to length: never empty for a waiter to read
                    line = holder.encode() + b"\n"
                    os.pwrite(fd, line, 0)
                    os.ftruncate(fd, len(line))
                except OSError as err:
                    raise StateError(f"cannot write {system_path}: {err.strerror}") from err
            _HELD[key] = 1
            try:
                yield
            finally:
                _HELD.pop(key, None)
                if holder is not None:
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing releases the lock

    # -- commands and services ------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        mutates: bool = True,
        sandboxed: bool = True,
        secret_args: bool = False,
    ) -> CommandResult:
        """Run a command from an argument list (never a shell), capturing its output.

        `mutates=False` marks a read (e.g. `chronyc tracking`): allowed on a read-only
        host and not counted as a side effect. `sandboxed=False`: a command the agent
        runs for the node's owner (bootstrap data, kubeadm), run outside the unit's
        hardening when it asks for that (OUTSIDE_SANDBOX_ENV). Command lines are logged
        redacted; with `secret_args` (the bootstrap data's commands: `curl -u admin:pw`)
        only the program and the size and digest of its arguments are.
        """
        import subprocess  # only commands need it; keeps start-up light

        args, shown = self._command_line(argv, mutates, secret_args)
        if self.image:
            deferred = self._in_image(args, shown, mutates)
            if deferred is not None:
                return deferred
            args = ("chroot", str(self.root), *args)
        start = time.monotonic()
        try:
            proc = subprocess.run(
                self._launched(args, env, timeout, sandboxed), input=input,
                capture_output=True, text=True, timeout=timeout,
                env={**os.environ, **self.env, **(env or {})}, check=False,
                stdin=None if input is not None else subprocess.DEVNULL,
            )
        except FileNotFoundError as err:
            raise _not_found(args[0]) from err
        except subprocess.TimeoutExpired as err:
            raise CommandTimeoutError(f"{shown} did not finish within {timeout:g}s") from err
        result = CommandResult(args, proc.returncode, proc.stdout, proc.stderr,
                               time.monotonic() - start)
        if mutates:
            self.effects.record(f"run {shown}")
        if check and not result.ok:
            raise CommandError(
                f"{shown} exited {result.returncode}: {self.redact(result.tail(500))}")
        return result

    def stream(
        self,
        argv: Sequence[str],
        on_line: Callable[[str], None],
        *,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        sandboxed: bool = True,
    ) -> CommandResult:
        """Run a long command (never a shell), handing each line of its output (stdout
        and stderr merged, in order, redacted) to `on_line` as it comes. At its time-out
        the command and what it started are killed and the output so far is kept:
        `timed_out` is set, nothing is raised. `sandboxed` as for `run`."""
        import selectors
        import subprocess

        args, shown = self._command_line(argv, mutates=True)
        if self.image:
            deferred = self._in_image(args, shown, True)
            if deferred is not None:
                return deferred
            args = ("chroot", str(self.root), *args)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(self._launched(args, env, timeout, sandboxed),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    env={**os.environ, **self.env, **(env or {})})
        except FileNotFoundError as err:
            raise _not_found(args[0]) from err
        assert proc.stdout is not None
        output, pending, timed_out = bytearray(), b"", False
        with proc.stdout, selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while True:
                left = start + timeout - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                if not selector.select(left):
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                output += chunk
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    on_line(self.redact(line.decode(errors="replace").rstrip("\r")))
            if pending:
                on_line(self.redact(pending.decode(errors="replace")))
        if timed_out or _wait(proc, start + timeout - time.monotonic()) is None:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self.effects.record(f"run {shown}")
        return CommandResult(args, proc.returncode, output.decode(errors="replace"), "",
                             time.monotonic() - start, timed_out)

    def _command_line(self, argv: Sequence[str], mutates: bool,
                      secret_args: bool = False) -> tuple[tuple[str, ...], str]:
        """The checked argument list and how it is shown (redacted, or with
        `secret_args` its program and a digest of the rest); a command that changes the
        system is refused on a read-only Host."""
        import hashlib

        args = tuple(argv)
        if not args or any(not isinstance(a, str) or "\0" in a for a in args):
            raise PermanentError("invalid command line: an argument is not text or holds "
                                 "NUL")
        if secret_args:
            blob = "\0".join(args[1:]).encode()
            shown = (f"{args[0]} <{len(args) - 1} arguments: {len(blob)} bytes, "
                     f"sha256:{hashlib.sha256(blob).hexdigest()[:12]}>")
        else:
            shown = self.redact(" ".join(args))
        if mutates:
            self.check_writable(f"run {shown}")
        log.debug("run: %s", shown)
        return args, shown

    def command_disposition(self, argv: Sequence[str]) -> tuple[str, str]:
        """What happens to a command on an image tree: ("chroot" | "defer" | "refuse",
        why). On a live node (not `image`): ("host", "")."""
        if not self.image:
            return "host", ""
        program = PurePosixPath(argv[0]).name if argv else ""
        if program == "systemctl":
            action = argv[1] if len(argv) > 1 else ""
            if action in ("restart", "reload", "try-restart", "start", "reload-or-restart"):
                return "defer", (f"the unit starts at the node's first boot with the files "
                                 f"written here (systemctl {action} deferred)")
            return "refuse", "an image tree has no running services to ask"
        if program in HOST_ONLY:
            return "refuse", (f"{program} changes or reads the running node, not an image: "
                              "it runs when the agent runs on the node at first boot")
        if os.geteuid() != 0:
            return "refuse", "running a command inside the image (chroot) needs root"
        if not self._image_has(argv[0]):
            return "refuse", f"the image at {self.root} has no {argv[0]} to run"
        return "chroot", f"run inside the image (chroot {self.root})"

    def _image_has(self, program: str) -> bool:
        if "/" in program:
            return os.access(self.path(program), os.X_OK)
        return any(os.access(self.path(f"{d}/{program}"), os.X_OK)
                   for d in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin",
                             "/sbin", "/bin"))

    def _in_image(self, args: tuple[str, ...], shown: str,
                  mutates: bool) -> CommandResult | None:
        """On an image tree: None to run `args` chrooted into it; a result for a
        command deferred to first boot; PermanentError for one refused."""
        how, why = self.command_disposition(args)
        if how == "chroot":
            return None
        if how == "defer":
            log.info("deferred to first boot: %s: %s", shown, why)
            if mutates:
                self.effects.record(f"defer {shown}")
            return CommandResult(args, 0, f"deferred to first boot: {why}", "", 0.0)
        raise PermanentError(f"refused on the image tree {self.root}: {shown}: {why}",
                             reason=Reason.NotOnImage)

    def _launched(self, args: tuple[str, ...], env: Mapping[str, str] | None,
                  timeout: float, sandboxed: bool) -> tuple[str, ...]:
        """What to execute for `args`: itself, or a transient service outside the
        unit's sandbox when the command asks to leave it and the unit allows it."""
        if sandboxed or os.environ.get(OUTSIDE_SANDBOX_ENV) != "systemd-run":
            return args
        passed = {k for k in os.environ if k in PASSED_OUTSIDE}
        return self._outside_sandbox(args, passed | set(self.env) | set(env or {}), timeout)

    def _outside_sandbox(self, args: tuple[str, ...], names: set[str],
                         timeout: float) -> tuple[str, ...]:
        """`args` as a transient service of systemd's: same output (--pipe), exit status
        (--wait) and the variables `names` from systemd-run's own environment (by name
        only: a value such as a proxy's password stays off the command line, which any
        local user can read); systemd stops it at the time-out even when systemd-run is
        killed first. A missing program is refused here, as the child would be (the
        transient service would only exit 203)."""
        found = args[0] if "/" in args[0] else self.which(args[0])
        if found is None or not os.access(found, os.X_OK):
            raise FileNotFoundError(args[0])
        return ("systemd-run", "--wait", "--pipe", "--collect", "--quiet",
                f"--property=RuntimeMaxSec={max(1, math.ceil(timeout))}",
                *(f"--setenv={name}" for name in sorted(names)), "--", found,
                *args[1:])

    def systemctl(self, action: str, unit: str) -> CommandResult:
        return self.run(["systemctl", action, unit], timeout=90,
                        mutates=action not in ("is-active", "is-enabled", "status", "show"))

    def which(self, name: str) -> str | None:
        import shutil

        path = self.env.get("PATH", os.environ.get("PATH"))
        return shutil.which(name, path=path)

    # -- netlink ----------------------------------------------------------------------

    def rtnetlink(self) -> socket.socket:
        """A plain NETLINK_ROUTE socket in the node's namespace, for the network phase's
        own rtnetlink client (agent/netlink). Changes through it must be recorded with
        `record_effect`; the caller closes it."""
        import socket

        return self.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # 0: NETLINK_ROUTE

    def socket(self, family: int, kind: int, proto: int = 0) -> socket.socket:
        """A socket in the node's namespace, for probes and reachability checks on the
        wire (ARP probes, TCP connects); it changes nothing. The caller closes it."""
        import socket

        if not self.netns:
            return socket.socket(family, kind, proto)
        return _socket_in_netns(self.netns, family, kind, proto)

    def set_ipv6_conf(self, settings: Sequence[tuple[str, str, int]]) -> list[bool]:
        """Write /proc/sys/net/ipv6/conf/LINK/KEY = VALUE for each (LINK, KEY, VALUE) in
        the node's namespace, in one visit to it (what netlink cannot set, as
        accept_ra); each write is recorded as a side effect. False for a setting not
        written because the link has no IPv6 (the kernel's or the link's is off)."""
        for link, key, _ in settings:
            if not _SYSCTL_WORD.fullmatch(link) or not _SYSCTL_WORD.fullmatch(key) \
                    or link in (".", ".."):
                raise PermanentError(f"refused sysctl net.ipv6.conf.{link!r}.{key!r}")
            self.check_writable(f"sysctl net.ipv6.conf.{link}.{key}")

        def write() -> list[bool]:
            done = []
            for link, key, value in settings:
                try:
                    with open(f"/proc/sys/net/ipv6/conf/{link}/{key}", "w") as out:
                        out.write(f"{value}\n")
                except FileNotFoundError:
                    done.append(False)
                else:
                    done.append(True)
            return done

        written = _in_netns(self.netns, write) if self.netns else write()
        for (link, key, value), ok in zip(settings, written, strict=True):
            if ok:
                self.effects.record(f"sysctl net.ipv6.conf.{link}.{key} = {value}")
        return written

    def record_effect(self, what: str) -> None:
        """Count a side effect made through a handle the Host gave out (netlink)."""
        self.check_writable(what)
        self.effects.record(what)


def _not_found(program: str) -> CommandError:
    return CommandError(f"command not found: {program}",
                        hint=f"install {program} or put it on PATH")


def _wait(proc: subprocess.Popen[bytes], seconds: float) -> int | None:
    """The exit status, or None when the process is still running after `seconds`."""
    import subprocess

    try:
        return proc.wait(timeout=max(seconds, 0.0))
    except subprocess.TimeoutExpired:
        return None


_SYSCTL_WORD = re.compile(r"[A-Za-z0-9_.@-]{1,15}")
"""An interface name or a key under /proc/sys/net/ipv6/conf: no '/', nothing to walk up."""
NETNS_RUN_DIR = "/var/run/netns"
"""Where `ip netns add` pins the named namespaces."""
CLONE_NEWNET = 0x40000000


def _socket_in_netns(name: str, family: int, kind: int, proto: int) -> socket.socket:
    """A socket made inside the named network namespace (see `_in_netns`): a socket
    stays in the namespace it was made in. pyroute2's helper forks a child and passes
    the descriptor back (13 ms a socket, after a 0.2 s import); the network phase opens
    a few per run."""
    import socket

    return _in_netns(name, lambda: socket.socket(family, kind, proto))


def _in_netns(name: str, action: Callable[[], T]) -> T:
    """`action`'s result, run by a short-lived thread that enters the named network
    namespace with setns(2), which moves only the calling thread (it ends right after).
    The namespace is never created here."""
    import ctypes
    import threading

    done: list[T] = []
    failed: list[OSError] = []

    def run() -> None:
        try:
            fd = os.open(f"{NETNS_RUN_DIR}/{name}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, f"cannot enter network namespace {name}: "
                                        f"{os.strerror(code)}")
            finally:
                os.close(fd)
            done.append(action())
        except OSError as err:
            failed.append(err)

    thread = threading.Thread(target=run, name=f"netns {name}")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return done[0]
