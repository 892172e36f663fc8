"""Hardening of units/machine-agent.service: `systemd-analyze security --offline=yes`'s
exposure score (0 = locked down, 10 = unprotected), next to the same unit with its
hardening block removed, and the exposures left open (each justified in the unit:
tests/integration/units/test_unit_files.py checks it).

    python bench/unit_security.py     # the score and the open items
    python -m bench.run --only unit_security
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.table import Row, sample

UNIT = Path(__file__).parents[1] / "units" / "machine-agent.service"
HARDENING_START = "# Hardening, as far as the job allows."


def exposure(unit_text: str) -> tuple[float, list[str]]:
    """The score and the open items of the unit `unit_text`."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        system = root / "usr/lib/systemd/system"
        shutil.copytree("/usr/lib/systemd/system", system, symlinks=True)
        (system / UNIT.name).write_text(unit_text)
        binary = root / "opt/machine-agent/bin/machine-agent"
        binary.parent.mkdir(parents=True)
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)
        out = subprocess.run(
            ["systemd-analyze", "security", "--offline=yes", f"--root={root}",
             "--no-pager", UNIT.name],
            capture_output=True, text=True, check=False).stdout
    return parse(out)


def parse(out: str) -> tuple[float, list[str]]:
    """The score and the open items (`✗` lines) of `systemd-analyze security`'s table."""
    score = re.search(r"Overall exposure level for \S+: ([0-9.]+)", out)
    if score is None:
        sys.exit(f"no score in systemd-analyze's output:\n{out}")
    open_items = [line.split()[1] for line in out.splitlines()
                  if line.startswith("✗")]
    return float(score.group(1)), open_items


def unhardened(text: str) -> str:
    head, _, rest = text.partition(HARDENING_START)
    return head + rest[rest.index("[Install]"):]


def measure(quick: bool) -> list[Row]:
    """The same figures in every mode: systemd-analyze takes a second either way."""
    text = UNIT.read_text()
    hardened, left = exposure(text)
    bare, _ = exposure(unhardened(text))
    return [
        Row("machine-agent.service exposure (systemd-analyze security)",
            sample([hardened], "/10"), sample([bare], "/10"), "without its hardening",
            "<= 0.5x", max_ratio=0.5),
        Row("machine-agent.service exposures left open (justified in the unit)",
            sample([len(left)], "items"), goal="(reference)"),
    ]


def main() -> None:
    text = UNIT.read_text()
    hardened, left = exposure(text)
    unhardened_score, _ = exposure(unhardened(text))
    print(f"machine-agent.service exposure: {hardened:.1f} / 10 "
          f"(without its hardening block: {unhardened_score:.1f}; "
          f"ratio {hardened / unhardened_score:.2f})")
    print(f"open ({len(left)}), each justified in the unit file:")
    for item in left:
        print(f"  {item}")


if __name__ == "__main__":
    main()
