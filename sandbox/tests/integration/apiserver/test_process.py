"""The stand-in run as a process, the way `machine-agent demo` starts it."""

from __future__ import annotations

import select
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sandbox.tests.integration.apiserver.kubeclient import Kube


@pytest.mark.allow_processes
def test_the_module_runs_as_a_process_and_writes_ca_and_kubeconfig(tmp_path: Path) -> None:
    """Starts the stand-in itself (also when the suite runs against a real server)."""
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "machine_agent_sandbox.apiserver", "--port", "0", "--state-dir",
         str(state), "--no-ipam"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "the stand-in did not print its URL within 30 s"
        url = proc.stdout.readline().strip()  # printed once listening
        assert url.startswith("https://127.0.0.1:")
        config = yaml.safe_load((state / "admin.kubeconfig").read_text())
        assert config["clusters"][0]["cluster"]["server"] == url
        token = config["users"][0]["user"]["token"]
        admin = Kube(url, str(state / "ca.crt"), token=token)
        admin.check(admin.get("/api/v1/namespaces/default"), 200)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 0
