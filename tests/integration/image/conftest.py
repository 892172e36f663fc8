"""The .deb for each distribution, built once per session by images/build.sh deb (a
debootstrap tree of the distribution, cached under CACHE_DIR, is where it is built)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).parents[3]


@pytest.fixture(scope="session")
def deb_for(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    built: dict[str, Path] = {}

    def build(suite: str) -> Path:
        if suite not in built:
            out = tmp_path_factory.mktemp(f"deb-{suite}")
            proc = subprocess.run(["bash", "images/build.sh", "deb", str(out), suite], cwd=REPO,
                                  capture_output=True, text=True, timeout=1800, check=False)
            assert proc.returncode == 0, f"the {suite} .deb failed:\n{proc.stderr[-3000:]}"
            built[suite] = Path(proc.stdout.strip())
        return built[suite]

    return build


@pytest.fixture(scope="module")
def deb(deb_for: Callable[[str], Path]) -> Path:
    """The .deb for Debian 12 (bookworm), the golden image's distribution."""
    return deb_for("bookworm")
