"""Under units/machine-agent.service the bootstrap data's commands and kubeadm run
outside the unit's hardening, as transient services (agent.host.OUTSIDE_SANDBOX_ENV):
modprobe, swapoff, writes under /usr in preKubeadmCommands would fail inside it. The boot
test (tests/e2e/test_image_boot.py) runs such commands under the real unit."""

from __future__ import annotations

from pathlib import Path

import pytest
from machine_agent_sandbox.testkit.bootstrap import cloud_config

from agent.host import OUTSIDE_SANDBOX_ENV
from tests import fake_systemd_run
from tests.integration.join.conftest import Node, machine_facts


def test_runcmd_and_kubeadm_join_run_through_systemd_run_under_the_unit(
        node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = fake_systemd_run.install(tmp_path)
    node.host.env["PATH"] = f"{tmp_path}:{node.host.env['PATH']}"
    monkeypatch.setenv(OUTSIDE_SANDBOX_ENV, "systemd-run")
    data = cloud_config(node.endpoint, pre=("echo pre-kubeadm",), post=("echo post-kubeadm",))
    result, machine = node.run(node.configure({}), machine_facts(data))
    assert result.ok, result.outcomes
    assert machine.conditions["NodeJoined"].reason == "Joined"
    assert node.joined() and node.world["joins"] == ["worker-0"]
    launched = [call[call.index("--") + 1:] for call in fake_systemd_run.calls(log)]
    shown = [" ".join([Path(argv[0]).name, *argv[1:3]]) for argv in launched]
    assert shown == ["sh -c echo pre-kubeadm", "kubeadm join --config",
                     "sh -c echo post-kubeadm"], launched
