"""No module of the agent or the sandbox (its tests too) over 500 lines (docs/design.md):
a module that grows past it holds more than one job; split it by what its parts hold."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).parents[2]
LIMIT = 500
TREES = ("agent", "sandbox")


def too_long(root: Path, trees: tuple[str, ...], limit: int = LIMIT) -> dict[str, int]:
    """Modules under `root`'s `trees` over `limit` lines, with their length."""
    lengths = {str(p.relative_to(root)): len(p.read_text().splitlines())
               for tree in trees for p in sorted((root / tree).rglob("*.py"))}
    return {name: n for name, n in lengths.items() if n > limit}


def test_no_module_is_over_500_lines() -> None:
    assert sum(1 for tree in TREES for _ in (REPO / tree).rglob("*.py")) > 100
    assert too_long(REPO, TREES) == {}


def test_the_limit_is_seen(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "deep").mkdir(parents=True)
    (tmp_path / "pkg" / "deep" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * LIMIT)
    assert too_long(tmp_path, ("pkg",)) == {"pkg/deep/long.py": LIMIT + 1}
