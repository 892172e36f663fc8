"""Hardening of units/machine-agent.service: `systemd-analyze security --offline=yes`'s
exposure score (0 = locked down, 10 = unprotected), next to the same unit with its
hardening block removed, and the exposures left open (each justified in the unit).

    python bench/unit_security.py
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

UNIT = Path(__file__).parents[1] / "units" / "machine-agent.service"
HARDENING_START = "# Hardening, as far as the job allows."


def exposure(unit_text: str) -> tuple[float, list[str]]:
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
    score = re.search(r"Overall exposure level for \S+: ([0-9.]+)", out)
    if score is None:
        sys.exit(f"no score in systemd-analyze's output:\n{out}")
    open_items = [line.split()[1] for line in out.splitlines()
                  if line.startswith("✗")]
    return float(score.group(1)), open_items


def main() -> None:
    text = UNIT.read_text()
    head, _, rest = text.partition(HARDENING_START)
    bare = head + rest[rest.index("[Install]"):]
    hardened, left = exposure(text)
    unhardened, _ = exposure(bare)
    print(f"machine-agent.service exposure: {hardened:.1f} / 10 "
          f"(without its hardening block: {unhardened:.1f}; "
          f"ratio {hardened / unhardened:.2f})")
    print(f"open ({len(left)}), each justified in the unit file:")
    for item in left:
        print(f"  {item}")


if __name__ == "__main__":
    main()
