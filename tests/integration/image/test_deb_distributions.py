"""Each distribution's .deb installed on a bare system of that distribution (a copy of a
cached debootstrap minbase tree, chroot, no container) the way an administrator does:
`dpkg -i` then `apt-get -f install` for its dependencies from the distribution's mirror.
The agent then runs on that distribution's python3 and finds its default configuration
valid."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).parents[3]
pytestmark = pytest.mark.allow_processes


def run(argv: list[str], timeout: float = 900) -> str:
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert proc.returncode == 0, f"{argv[:5]} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.mark.parametrize(("suite", "python"), [("bookworm", "3.11"), ("trixie", "3.13"),
                                               ("noble", "3.12")])
def test_installs_with_apt_and_runs_on_the_distributions_python(
        deb_for: Callable[[str], Path], suite: str, python: str, tmp_path: Path) -> None:
    deb = deb_for(suite)
    target = run(["bash", "images/build.sh", "tree", "target", suite]).strip()
    tree = tmp_path / "tree"
    run(["cp", "-a", target, str(tree)])
    run(["cp", str(deb), str(tree / "tmp")])
    # a bare system lacks python3 and systemd: dpkg leaves the package unconfigured ...
    assert subprocess.run(["chroot", str(tree), "dpkg", "-i", f"/tmp/{deb.name}"],
                          capture_output=True, timeout=600, check=False).returncode != 0
    # ... and apt brings them from the distribution's mirror and configures it
    env = ["env", "DEBIAN_FRONTEND=noninteractive"]
    run(["chroot", str(tree), *env, "apt-get", "-q", "update"])
    run(["chroot", str(tree), *env, "apt-get", "-q", "-y", "-f", "install"])
    status = run(["chroot", str(tree), "dpkg-query", "-W", "-f", "${Status} ${Version}",
                  "machine-agent"])
    assert status == f"install ok installed {deb.name.split('_')[1]}"
    assert run(["chroot", str(tree), "machine-agent", "--version"]) == "machine-agent 0.1.0\n"
    assert run(["chroot", str(tree), "readlink", "-f", "/opt/machine-agent/bin/python"]) == \
        f"/usr/bin/python{python}\n"
    assert "valid" in run(["chroot", str(tree), "machine-agent", "config", "validate",
                           "/etc/machine-agent/config.yaml"])
