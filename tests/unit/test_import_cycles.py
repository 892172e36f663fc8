"""No import cycles in the node package or the sandbox: a module that imports a module
that imports it back (directly or around a longer loop, also under TYPE_CHECKING or inside
a function) is one unit in disguise, and a layer that can only be drawn by hiding the
import. The static graph is grimp's (the one import-linter reads)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import grimp
import pytest

PACKAGES = ("agent", "machine_agent_sandbox")


def cycles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """The groups of `package`'s modules that import one another (the strongly
    connected components of more than one module, or a module importing itself)."""
    modules = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    inside = set(modules)

    def imported_by(module: str) -> list[str]:
        return sorted(m for m in graph.find_modules_directly_imported_by(module)
                      if m in inside)

    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in modules:  # Tarjan's algorithm, with a work list instead of recursion
        if root in index:
            continue
        work = [(root, iter(imported_by(root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, pending = work[-1]
            step = next(pending, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(imported_by(step))))
                elif step in on_stack:
                    low[module] = min(low[module], index[step])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1 or module in imported_by(module):
                    found.append(sorted(group))
    return found


def _graph(packages: Iterable[str]) -> grimp.ImportGraph:
    return grimp.build_graph(*packages, cache_dir=None)


def test_no_module_imports_itself_back() -> None:
    graph = _graph(PACKAGES)
    assert {p: cycles(graph, p) for p in PACKAGES} == {p: [] for p in PACKAGES}


def test_the_check_sees_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cycle hidden as the code base hid them: one import under TYPE_CHECKING, one
    inside a function, around three modules; a fourth module outside it."""
    package = tmp_path / "loop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from loop import b\n")
    (package / "b.py").write_text("def f():\n    from loop import c\n")
    (package / "c.py").write_text("import loop.a\n")
    (package / "d.py").write_text("import loop.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert cycles(_graph(["loop"]), "loop") == [["loop.a", "loop.b", "loop.c"]]
    finally:
        for name in [m for m in sys.modules if m == "loop" or m.startswith("loop.")]:
            del sys.modules[name]
