"""Install the phases of tests/plugins as a distribution declares them: a dist-info with
entry points in the group machine_agent.phases, on sys.path."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.phases import registry

PHASES = {"motd": "tests.plugins.motd:MotdPhase", "quiet": "tests.plugins.motd:QuietPhase"}
"""The plugin phases, by name: what their entry points name."""


def install(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put a distribution declaring PHASES in `site`, and `site` on sys.path (undone
    with the test by `monkeypatch`)."""
    info = site / "machine_agent_motd-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: machine-agent-motd\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{registry.GROUP}]\n" + "".join(f"{n} = {t}\n" for n, t in PHASES.items()))
    monkeypatch.syspath_prepend(str(site))
