"""`machine-agent demo --cleanup` removes this installation's kept sandboxes and those a
killed demo left, never a sandbox another checkout (or user) kept and may be using."""

from __future__ import annotations

from pathlib import Path

from machine_agent_sandbox.cleanup import Registry, leftovers, others_kept


def made(parent: Path, *, kept: bool, by: str, owner: int | None = None) -> Registry:
    registry = Registry.create(str(parent))
    registry.record.kept, registry.record.made_by = kept, by
    if owner is not None:
        registry.record.owner = owner
    registry.save()
    return registry


def test_cleanup_takes_its_own_kept_sandboxes_and_killed_demos_but_not_anothers(
        tmp_path: Path) -> None:
    mine = made(tmp_path, kept=True, by="/opt/checkout-a/.venv")
    theirs = made(tmp_path, kept=True, by="/home/other/.venv")
    older = made(tmp_path, kept=True, by="")  # kept before sandboxes said who made them
    killed = made(tmp_path, kept=False, by="/home/other/.venv", owner=2**22 + 1)
    running = made(tmp_path, kept=False, by="/home/other/.venv")  # its demo still runs
    found = {r.base for r in leftovers(str(tmp_path), kept_by="/opt/checkout-a/.venv")}
    assert found == {mine.base, older.base, killed.base}
    assert theirs.base not in found and running.base not in found
    assert [r.base for r in others_kept(str(tmp_path), kept_by="/opt/checkout-a/.venv")] == [
        theirs.base]
