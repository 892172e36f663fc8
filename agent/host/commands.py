"""The Host's commands: run or streamed, with a time-out, secrets redacted from what
is logged; on an image tree run inside it, deferred or refused; outside the
service's sandbox when asked."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from agent.errors import CommandError, CommandTimeoutError, PermanentError, Reason
from agent.host.base import HostState
from agent.recordtype import record

if TYPE_CHECKING:
    import subprocess

log = logging.getLogger("agent.host")  # one logger for the whole Host


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


HOST_ONLY = frozenset({"kubeadm", "kubelet", "ip", "chronyc", "timedatectl", "hwclock",
                       "modprobe", "sysctl", "mount", "reboot"})
"""Programs that act on (or read) the running node's kernel, clock or cluster
membership: never run against an image tree, chrooted or not."""


@record(frozen=True)
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


class Commands(HostState):
    """A part of Host (agent.host)."""

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
