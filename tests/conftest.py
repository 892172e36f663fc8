"""Suite-wide guards: no test spawns a process or writes outside its temporary tree by
accident. Side effects are allowed through `agent.host` (the Host under test points at a
temporary root) and in tests marked `allow_processes` (namespaces, real daemons)."""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "machine-agent", database=None, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
settings.load_profile("machine-agent")


@pytest.hookimpl(trylast=True)  # after pytest's tmp_path plugin has set up
def pytest_configure(config: pytest.Config) -> None:
    # Hypothesis keeps a cache directory; keep it in pytest's temporary tree, where the
    # guard allows writes, not in the work tree.
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(str(config._tmp_path_factory.getbasetemp() / "hypothesis"))  # type: ignore[attr-defined]

# The suite's --root trees without --netns are test nodes whose stand-in commands run on
# this host (agent.commands.COMMANDS_ON_HOST_ENV); tests of the image-tree policy unset it.
os.environ["MACHINE_AGENT_COMMANDS_ON_HOST"] = "1"

SESSION_ENV = "MACHINE_AGENT_TEST_SESSION"
"""Set for the whole run and inherited by every process a test starts, however far down
(a chronyd under faketime, a kubeadm under the agent): what the stray-process guard
recognises them by. Parentage cannot tell: an orphan is adopted by init when its parent
(e.g. the faketime wrapper) is killed."""
os.environ.setdefault(SESSION_ENV, f"{os.getpid()}-{os.urandom(4).hex()}")
_MARK = f"{SESSION_ENV}={os.environ[SESSION_ENV]}".encode()
STRAY_GRACE = 3.0
"""Seconds a process killed at a test's end may take to go."""


def _pids() -> set[int]:
    return {int(name) for name in os.listdir("/proc") if name.isdigit()}


def _ours(pid: int) -> str | None:
    """The command line of a live process this run started (by its environment); None
    for any other, or one that is gone or a zombie (no environment left)."""
    try:
        with builtins.open(f"/proc/{pid}/environ", "rb") as handle:
            if _MARK not in handle.read().split(b"\0"):
                return None
        with builtins.open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None


@pytest.fixture(autouse=True)
def own_redactions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets a test registers with REDACT (the process's one registry) end with it: a
    value one test registered, a node name among them, was cut from a later test's
    messages (CI, 2026-12-03: "site-a/***" for "site-a/worker-0")."""
    from agent.logs import REDACT

    monkeypatch.setattr(REDACT, "_secrets", set(REDACT._secrets))


@pytest.fixture(autouse=True)
def stray_process_guard() -> Iterator[None]:
    """Fail a test that leaves a process behind (and kill it): every process started
    since the test began that still runs with this run's SESSION_ENV after the test's
    own teardown."""
    import signal
    import time

    before = _pids()
    yield
    deadline = time.monotonic() + STRAY_GRACE
    while True:
        stray = {pid: cmd for pid in _pids() - before if (cmd := _ours(pid)) is not None}
        if not stray or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    for pid in stray:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not stray, f"the test left processes running (now killed): {stray}"


_WRITE_MODES = set("wax+")


def _called_through_host() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        name = str(frame.f_globals.get("__name__"))
        if name == "agent.host" or name.startswith("agent.host."):  # the Host's package
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class _Guard:
    def __init__(self, allowed_roots: list[Path]) -> None:
        self.allowed = [str(p) for p in allowed_roots]
        self.violations: list[str] = []

    def path_ok(self, target: Any) -> bool:
        if isinstance(target, int):
            return True  # an already-open descriptor
        path = os.path.abspath(os.fsdecode(target))
        return path == os.devnull or any(
            path == root or path.startswith(root + os.sep) for root in self.allowed)

    def refuse(self, what: str) -> None:
        self.violations.append(what)
        raise AssertionError(f"test side effect outside its sandbox: {what}")


@pytest.fixture(autouse=True)
def side_effect_guard(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    if request.node.get_closest_marker("allow_processes"):
        yield
        return
    guard = _Guard([tmp_path_factory.getbasetemp().resolve()])
    patches: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = getattr(owner, name)
        patches.append((owner, name, original))
        setattr(owner, name, make(original))

    def guarded_open(original: Any) -> Any:
        def opener(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if _WRITE_MODES & set(mode) and not guard.path_ok(file):
                guard.refuse(f"open({file!r}, {mode!r})")
            return original(file, mode, *args, **kwargs)
        return opener

    def guarded_path_op(original: Any, what: str) -> Any:
        def op(path: Any, *args: Any, **kwargs: Any) -> Any:
            if not guard.path_ok(path):
                guard.refuse(f"{what}({path!r})")
            return original(path, *args, **kwargs)
        return op

    def guarded_spawn(original: Any, what: str) -> Any:
        def spawn(*args: Any, **kwargs: Any) -> Any:
            if not _called_through_host():
                guard.refuse(f"{what} outside the Host port")
            return original(*args, **kwargs)
        return spawn

    patch(builtins, "open", guarded_open)
    patch(io, "open", guarded_open)
    for name in ("mkdir", "unlink", "remove", "rmdir", "chmod", "chown"):
        patch(os, name, lambda orig, n=name: guarded_path_op(orig, f"os.{n}"))
    for name in ("replace", "rename"):
        patch(os, name, lambda orig, n=name: _guard_two(guard, orig, f"os.{n}"))
    patch(subprocess.Popen, "_execute_child", lambda orig: guarded_spawn(orig, "subprocess"))
    for name in ("system", "fork", "posix_spawn", "posix_spawnp"):
        patch(os, name, lambda orig, n=name: guarded_spawn(orig, f"os.{n}"))
    try:
        yield
    finally:
        for owner, name, original in reversed(patches):
            setattr(owner, name, original)
    assert not guard.violations, f"stray side effects: {guard.violations}"


def _guard_two(guard: _Guard, original: Any, what: str) -> Any:
    def op(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
        for p in (src, dst):
            if not guard.path_ok(p):
                guard.refuse(f"{what}({src!r}, {dst!r})")
        return original(src, dst, *args, **kwargs)
    return op


NO_SKIP_ENV = "MACHINE_AGENT_TEST_NO_SKIP"
"""Set to 1 (tests/run-against-external.sh does): a skipped test fails, naming why it
skipped. Against an external API server nothing may skip; a skip would count as passed
by whoever reads only the exit code."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if os.environ.get(NO_SKIP_ENV) == "1" and report.skipped and \
            not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped, which {NO_SKIP_ENV}=1 forbids: {reason}"
    return report
