"""An expired bootstrap token, in a real run: the agent reads the Machine's bootstrap
Secret again through the management cluster and joins with the rotated token, or stops
with TokenExpired when the Secret still holds the dead one."""

from __future__ import annotations

import base64
import json
from typing import Any

from machine_agent_sandbox.testkit.bootstrap import FRESH_TOKEN, TOKEN, cloud_config

from agent.host import Host
from agent.orchestrator import RunResult
from agent.session import open_session
from tests.integration.kube.conftest import SECRET, Admin, FastClock, Node, World
from tests.integration.kube.test_faults import hooked


def only_fresh_token_known(world: World) -> None:
    """The workload cluster deleted the first token (expired) and knows the new one."""
    assert world.world_path is not None
    doc = json.loads(world.world_path.read_text())
    world.world_path.write_text(json.dumps({**doc, "tokens": {"ghijkl": "0123456789ghijkl"}}))


def rotate_secret(admin: Admin, world: World) -> None:
    """What CABPK does: the bootstrap Secret's data now carries a fresh token."""
    value = base64.b64encode(cloud_config(world.endpoint, token=FRESH_TOKEN).encode()).decode()
    admin.call("PATCH", f"/api/v1/namespaces/{admin.ns}/secrets/{SECRET}",
               {"data": {"value": value}}, content_type="application/merge-patch+json")


def run_rotating(node: Node, rotate: bool, admin: Admin, world: World) -> RunResult:
    host = Host(node.root, clock=FastClock())
    session = open_session(host)  # reads the Secret with the first token

    def before_join() -> None:  # the plan holds the first token already
        if rotate:
            rotate_secret(admin, world)

    return session.orchestrator(host, phases=hooked({"join": before_join})).run()


def attempts(node: Node) -> list[tuple[str, Any]]:
    journal = json.loads((node.root / "var/lib/machine-agent/journal.json").read_text())
    return [(a["outcome"], a.get("reason")) for a in journal["extra"]["join"]["attempts"]]


def test_an_expired_token_is_replaced_by_the_rotated_secret(
        node: Node, admin: Admin, world: World) -> None:
    only_fresh_token_known(world)
    result = run_rotating(node, True, admin, world)
    assert result.ok, result.outcomes
    joined = admin.conditions()["NodeJoined"]
    assert (joined["status"], joined["reason"]) == ("True", "Joined")
    assert attempts(node) == [("failed", "TokenExpired"), ("joined", None)]
    config = (node.root / "run/kubeadm/kubeadm-join-config.yaml").read_text()
    assert FRESH_TOKEN in config and TOKEN not in config


def test_a_secret_still_holding_the_dead_token_ends_token_expired(
        node: Node, admin: Admin, world: World) -> None:
    only_fresh_token_known(world)
    result = run_rotating(node, False, admin, world)
    assert not result.ok
    joined = admin.conditions()["NodeJoined"]
    assert (joined["status"], joined["reason"]) == ("False", "TokenExpired")
    assert "the bootstrap data read again still has the same token" in joined["message"]
    assert attempts(node) == [("failed", "TokenExpired")]  # read again once, no loop
    assert TOKEN not in joined["message"]
