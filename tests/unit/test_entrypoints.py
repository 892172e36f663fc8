"""agent.entrypoints reads the installed distributions' entry points as
importlib.metadata does (which a bootstrap no longer imports): the same entry points for
every group, the first distribution of a name on sys.path winning, comments and other
groups ignored, `module:attr.path` loaded."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from agent import entrypoints


def install(site: Path, dist: str, text: str) -> None:
    info = site / dist
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist.split('-')[0]}\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(text)


def both(group: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    ours = sorted((ep.name, ep.value) for ep in entrypoints.entry_points(group))
    theirs = sorted((ep.name, ep.value)
                    for ep in importlib.metadata.entry_points(group=group))
    return ours, theirs


def test_the_same_entry_points_as_importlib_metadata(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    install(first, "Some.Plugin-1.0.dist-info",
            "# a comment\n[machine_agent.ipam]\nmine = agent.ipam.static:StaticPlugin\n"
            "\n[console_scripts]\nsome = some.cli:main\n")
    install(second, "some_plugin-0.9.dist-info",  # the same distribution, later: shadowed
            "[machine_agent.ipam]\nold = agent.ipam.static:StaticPlugin\n")
    install(second, "other-2.0.egg-info",
            "[machine_agent.ipam]\nnested = agent.retry:Backoff.delay\n")
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    for group in ("machine_agent.ipam", "machine_agent.phases", "machine_agent.commands",
                  "console_scripts"):
        ours, theirs = both(group)
        assert ours == theirs, group
    found = {ep.name: ep for ep in entrypoints.entry_points("machine_agent.ipam")}
    assert "old" not in found and {"mine", "nested", "static", "netbox", "capi"} <= set(found)
    from agent.ipam.static import StaticPlugin
    from agent.retry import Backoff

    assert found["mine"].load() is StaticPlugin
    assert found["nested"].load() is Backoff.delay
