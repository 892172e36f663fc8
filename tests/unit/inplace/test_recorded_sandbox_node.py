"""The calls the real Cluster API v1.14 controllers made to this project's update extension
while a sandbox node's daemon carried the updates out
(tests/fixtures/real-capi/in-place-sandbox-node.json: template rotations;
in-place-release-sandbox-node.json: the MachineDeployment's version moved to newer patch
releases): what the extension answers to the recorded CanUpdateMachineSet requests today
is what it answered then, and Cluster API's verdict on those answers is in place. (Their
UpdateMachine calls are replayed on a sandbox node in tests/e2e/test_in_place_update.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.inplace.decide import can_update_machine_set
from tests.unit.inplace.test_decide import in_place

FIXTURES = Path(__file__).parents[2] / "fixtures/real-capi"
CAN_UPDATE = {f"{name}:{label}": call for name, labels in (
    ("in-place-sandbox-node", ("workers-v2", "workers-v3")),
    ("in-place-release-sandbox-node", ("v1.31.3", "v1.31.4")))
    for label, call in zip(labels, [
        c for c in json.loads((FIXTURES / f"{name}.json").read_text())["hook_calls"]
        if c["path"].endswith("can-update-machineset")], strict=True)}


@pytest.mark.parametrize("call", CAN_UPDATE.values(), ids=CAN_UPDATE.keys())
def test_the_recorded_changes_are_answered_as_then_and_made_in_place(
        call: dict[str, Any]) -> None:
    answer = can_update_machine_set(call["request"])
    assert answer == call["response"]
    assert in_place(call["request"], answer)
