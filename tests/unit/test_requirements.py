"""The release's runtime dependencies are pinned with their hashes (requirements/
runtime.txt, pip-compile's output) and the image recipe installs from that file only, so
every image build gets the same files whatever the index has that day."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).parents[2]


def names(lines: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[ ]", line, maxsplit=1)[0].lower().replace("_", "-")
            for line in lines}


def requirements(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines()
            if line and not line.startswith((" ", "#"))]


def test_the_input_is_the_projects_own_dependency_list() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert sorted(requirements(REPO / "requirements/runtime.in")) == \
        sorted(project["dependencies"])


def test_every_package_is_pinned_to_one_version_with_its_hashes() -> None:
    text = (REPO / "requirements/runtime.txt").read_text()
    entries = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\\n((?:    --hash=sha256:[0-9a-f]{64}"
                         r"(?: \\)?\n)+)", text, re.M)
    pinned = {name.lower() for name, _, _ in entries}
    assert pinned == names(requirements(REPO / "requirements/runtime.txt"))
    # the direct dependencies and what they pull in (requests: urllib3, idna, ...)
    assert names(requirements(REPO / "requirements/runtime.in")) <= pinned
    assert {"urllib3", "idna", "markupsafe"} <= pinned


def test_the_image_recipe_installs_with_the_hashes_checked() -> None:
    script = (REPO / "images/build.sh").read_text()
    assert '--require-hashes --wheel-dir "$wheels" \\\n    -r "$REPO/requirements/runtime.txt"' \
        in script
    # the .deb's wheels (images/build.sh deb, for the tree's Python) fetched against the
    # same hashes, and its venv installed from them, checked again
    assert '"$python" -m pip download -q --require-hashes' in script
    assert '"${pip[@]}" --require-hashes -r "$inner/wheels/runtime.txt"' in script
    assert "--no-deps machine-agent" in script  # nothing resolved past the pins
