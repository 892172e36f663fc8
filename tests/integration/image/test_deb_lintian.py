"""The .deb as a Debian reviewer checks it: lintian finds no error and no warning, every
tag it is told to accept (the package's lintian overrides) carries its reason in the
overrides file and matches something lintian found, the copyright file names the license
of each distribution the venv holds, and the manual page lists the commands."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.allow_processes
OVERRIDES = "usr/share/lintian/overrides/machine-agent"


def lintian(deb: Path, *options: str) -> subprocess.CompletedProcess[str]:
    # -I: also the informational tags, among them unused-override and mismatched-override
    return subprocess.run(["lintian", "--fail-on", "error,warning", "-I", *options, str(deb)],
                          capture_output=True, text=True, timeout=900, check=False)


def unpacked(deb: Path, tmp_path: Path) -> Path:
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True, timeout=120)
    return tmp_path


@pytest.mark.parametrize("suite", ["bookworm", "trixie", "noble"])
def test_lintian_finds_no_error_no_warning_and_no_unjustified_override(
        deb_for: Callable[[str], Path], suite: str, tmp_path: Path) -> None:
    deb = deb_for(suite)
    found = lintian(deb)
    assert found.returncode == 0, found.stdout[-3000:] + found.stderr[-3000:]
    tags = found.stdout.splitlines()
    assert not [t for t in tags if t.startswith(("E:", "W:"))]
    assert not [t for t in tags if "unused-override" in t or "mismatched-override" in t], tags
    # Each override is preceded by the comment that says why the tag does not apply.
    lines = (unpacked(deb, tmp_path) / OVERRIDES).read_text().splitlines()
    overrides = [i for i, line in enumerate(lines) if line.startswith("machine-agent: ")]
    assert overrides
    for i in overrides:
        before = i
        while before > 0 and lines[before - 1].startswith("machine-agent: "):
            before -= 1  # one reason may cover adjacent overrides of one file
        assert before > 0 and lines[before - 1].startswith("# "), lines[i]
    # (an overridden error still fails lintian --show-overrides: shown apart)
    shown = lintian(deb, "--show-overrides").stdout.splitlines()
    accepted = {line.split()[2] for line in shown if line.startswith("O: ")}
    assert accepted == {lines[i].split()[1] for i in overrides}, accepted


def test_the_package_says_its_licenses_and_its_history(deb: Path, tmp_path: Path) -> None:
    root = unpacked(deb, tmp_path)
    copyright_ = (root / "usr/share/doc/machine-agent/copyright").read_text()
    assert copyright_.startswith(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/")
    assert re.search(r"^Files: \*\nCopyright: .+\nLicense: Apache-2\.0$", copyright_, re.M)
    site = next((root / "opt/machine-agent/lib").glob("python3.*/site-packages"))
    for dist in site.glob("*.dist-info"):
        name = dist.name.removesuffix(".dist-info").rsplit("-", 1)[0]
        if name != "machine_agent":
            assert f"/{name}-*.dist-info/*" in copyright_, name
    changelog = subprocess.run(
        ["gzip", "-dc", str(root / "usr/share/doc/machine-agent/changelog.gz")],
        capture_output=True, text=True, check=True, timeout=60).stdout
    version = subprocess.run(["dpkg-deb", "--field", str(deb), "Version"], capture_output=True,
                             text=True, check=True, timeout=60).stdout.strip()
    assert changelog.startswith(f"machine-agent ({version}) bookworm; urgency=medium\n")
    manual = subprocess.run(
        ["gzip", "-dc", str(root / "usr/share/man/man8/machine-agent.8.gz")],
        capture_output=True, text=True, check=True, timeout=60).stdout
    for command in ("run", "status", "config", "release-addresses", "clean"):
        roff = re.escape(command.replace("-", "\\-"))  # as roff writes a hyphen
        assert re.search(rf"^{roff}( |$)", manual, re.M), command  # as --help lists it
    # no copy of libyaml inside: the agent reads YAML with PyYAML's pure-Python loader
    assert not list(site.glob("yaml/_yaml*.so"))
