"""Suite-wide guards: no test spawns a process or writes outside its temporary tree by
accident. Side effects are allowed through `agent.host` (the Host under test points at a
temporary root) and in tests marked `allow_processes` (namespaces, real daemons)."""

from __future__ import annotations

import builtins
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
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

_WRITE_MODES = set("wax+")


def _called_through_host() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__") == "agent.host":
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
