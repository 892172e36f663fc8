"""The golden image of the qemu boot tests and the whole-boot benchmark: built by
images/build.sh with the boot test's guest files (tests/e2e/guest), the sandbox's source
and the kubeadm stand-in as the site's kubeadm and kubelet, then booted under qemu until
the guest powers itself off. Shared by tests/e2e and bench/whole_boot.py (the benchmarks
import the kit, never the tests); it works from the project's checkout."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).parents[3]
"""The project's checkout (the sandbox is installed from it in editable mode)."""
GUEST = REPO / "tests/e2e/guest"
STANDIN = REPO / "sandbox/machine_agent_sandbox/kubeadm_standin.py"
WORLD = "/var/lib/kubeadm-standin/world.json"  # in the guest files
SANDBOX_IN_GUEST = "/opt/machine-agent-sandbox"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_logged(argv: list[str], log: Path, timeout: float,
               env: dict[str, str] | None = None) -> None:
    with log.open("w") as out:
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                              timeout=timeout, check=False, env=env)
    assert proc.returncode == 0, f"{argv[:3]} failed:\n{log.read_text()[-3000:]}"


def site_binaries(bin_dir: Path) -> Path:
    """kubeadm and kubelet as a site provides them, here the kubeadm stand-in: run by the
    guest's own python3 (its PyYAML comes with cloud-init) from the sandbox's source that
    `sandbox_overlay` puts into the guest, so they need nothing of the agent's venv; its
    workload cluster is the world file of the guest files, which
    workload-apiserver.service completes with its API server's CA and signer token."""
    bin_dir.mkdir()
    for name, extra in (("kubeadm", ""), ("kubelet", " kubelet")):
        (bin_dir / name).write_text(
            f"#!/bin/sh\n# The kubeadm stand-in ({STANDIN.relative_to(REPO)}).\n"
            f"KUBEADM_STANDIN_WORLD={WORLD} PYTHONPATH={SANDBOX_IN_GUEST} exec /usr/bin/python3 "
            f"-m machine_agent_sandbox.kubeadm_standin{extra} \"$@\"\n")
    return bin_dir


def sandbox_overlay(root: Path) -> Path:
    """The sandbox's source under /opt/machine-agent-sandbox, for the test's own units
    (the workload API server, the kubelet stand-in): the image recipe installs the agent
    alone, so the test brings what it plays the cluster with."""
    shutil.copytree(REPO / "sandbox/machine_agent_sandbox",
                    root / SANDBOX_IN_GUEST.lstrip("/") / "machine_agent_sandbox",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def build_image(work: Path, extra: list[str], timeout: float) -> Path:
    """work/image, built by images/build.sh with this test's guest files, the sandbox
    and the site binaries, plus `extra` arguments (overlays, units to enable)."""
    run_logged(["bash", "images/build.sh", "image", "--out", str(work / "image"),
                "--site-bin", str(site_binaries(work / "site-bin")),
                "--overlay", str(GUEST), "--overlay", str(sandbox_overlay(work / "sandbox")),
                *extra],
               work / "build.log", timeout)
    return work / "image"


def boot(work: Path, serial_name: str, timeout: float, kernel_args: tuple[str, ...] = (),
         env: dict[str, str] | None = None) -> list[str]:
    """Boot work/image once (every boot a first boot: images/boot.sh's snapshot mode)
    until the guest powers itself off; its serial console, ANSI colours removed."""
    serial = work / serial_name
    # The guest powers itself off after reporting; qemu then exits 0.
    run_logged(["bash", "images/boot.sh", str(work / "image"), str(serial), *kernel_args],
               work / f"{serial.stem}.qemu.log", timeout, env)
    return [ANSI.sub("", line).rstrip("\r") for line in serial.read_text(
        errors="replace").splitlines()]
