"""The update extension speaks the Runtime SDK as Cluster API v1.14's own OpenAPI document
of it says (tests/fixtures/runtime-sdk): every answer it gives validates against the
hook's response schema, with no field the schema does not name, and the requests Cluster
API's controllers sent (recorded in tests/fixtures/real-capi) against the request
schemas, so the recordings the other tests replay are the shapes the hooks define."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any, cast

import jsonschema
import pytest
import yaml

from agent.inplace.decide import can_update_machine, can_update_machine_set
from agent.inplace.hooks import GROUP_VERSION, discovery
from agent.inplace.update import update_machine
from agent.kube.client import Client
from agent.kube.errors import Unreachable

FIXTURES = Path(__file__).parents[2] / "fixtures"
HOOKS = "sigs.k8s.io.cluster-api.api.runtime.hooks.v1alpha1"


@cache
def components() -> dict[str, Any]:
    """The document's schemas, strict: an object schema that names its properties allows
    no other (the generator leaves additionalProperties out; Go's decoder drops unknown
    fields silently, which is how a misspelt field would go unnoticed)."""
    doc = yaml.safe_load((FIXTURES / "runtime-sdk/runtime-sdk-openapi-v1.14.0.yaml")
                         .read_text())
    assert doc["info"]["version"] == "v1.14.0"
    strict = copy.deepcopy(doc["components"])

    def close(schema: Any) -> None:
        if isinstance(schema, dict):
            if "properties" in schema and "additionalProperties" not in schema:
                schema["additionalProperties"] = False
            for value in schema.values():
                close(value)
        elif isinstance(schema, list):
            for value in schema:
                close(value)

    close(strict)
    return cast(dict[str, Any], strict)


def check(kind: str, instance: dict[str, Any]) -> None:
    schema = {"$ref": f"#/components/schemas/{HOOKS}.{kind}", "components": components()}
    jsonschema.Draft7Validator(schema).validate(instance)


def recorded(hook: str) -> list[dict[str, Any]]:
    calls = []
    for name in ("in-place-sandbox-node", "in-place-release-sandbox-node"):
        doc = json.loads((FIXTURES / f"real-capi/{name}.json").read_text())
        calls += [c for c in doc["hook_calls"] if c["path"].split("/")[-2] == hook]
    assert calls, hook
    return calls


def test_discovery_answers_as_the_schema_says() -> None:
    check("DiscoveryResponse", discovery())


def test_a_misspelt_field_is_caught() -> None:
    """The check is strict: a field the schema does not name fails it."""
    answer = {**discovery(), "handler": []}
    with pytest.raises(jsonschema.ValidationError, match="handler"):
        check("DiscoveryResponse", answer)


@pytest.mark.parametrize("hook, kind", [("canupdatemachineset", "CanUpdateMachineSetRequest"),
                                        ("updatemachine", "UpdateMachineRequest")])
def test_the_recorded_requests_are_the_hooks_shapes(hook: str, kind: str) -> None:
    for call in recorded(hook):
        check(kind, call["request"])


def test_can_update_machine_set_answers_as_the_schema_says() -> None:
    for call in recorded("canupdatemachineset"):
        request = copy.deepcopy(call["request"])
        request["desired"]["machineSet"]["spec"]["template"]["spec"]["version"] = "v1.31.9"
        answer = can_update_machine_set(request)
        assert "machineSetPatch" in answer
        check("CanUpdateMachineSetResponse", answer)


def test_can_update_machine_answers_as_the_schema_says() -> None:
    update = recorded("updatemachine")[0]["request"]["desired"]
    machine = copy.deepcopy(update["machine"])
    machine["spec"]["version"] = "v1.31.2"
    desired = copy.deepcopy(machine)
    desired["spec"]["version"] = "v1.31.3"
    config = copy.deepcopy(update["bootstrapConfig"])
    wanted = copy.deepcopy(config)
    wanted["spec"]["ntp"] = {"enabled": True, "servers": ["192.0.2.123"]}
    request = {"apiVersion": GROUP_VERSION, "kind": "CanUpdateMachineRequest",
               "current": {"machine": machine, "bootstrapConfig": config,
                           "infrastructureMachine": update["infrastructureMachine"]},
               "desired": {"machine": desired, "bootstrapConfig": wanted,
                           "infrastructureMachine": update["infrastructureMachine"]}}
    check("CanUpdateMachineRequest", request)
    answer = can_update_machine(request)
    assert {"machinePatch", "bootstrapConfigPatch"} <= set(answer)
    check("CanUpdateMachineResponse", answer)


def test_update_machine_answers_as_the_schema_says() -> None:
    request = copy.deepcopy(recorded("updatemachine")[0]["request"])
    request["desired"]["bootstrapConfig"]["spec"] = {}
    request["desired"]["machine"]["metadata"]["labels"]["cluster.x-k8s.io/control-plane"] = ""
    nothing = update_machine(request, cast(Client, None))  # answered before any API call
    assert nothing["status"] == "Success" and not nothing["retryAfterSeconds"]
    check("UpdateMachineResponse", nothing)
    refused = update_machine(request | {"desired": {**request["desired"], "bootstrapConfig": {
        "spec": {"ntp": {"servers": ["192.0.2.123"]}}}}}, cast(Client, _Unreachable()))
    assert refused["status"] == "Failure", refused
    check("UpdateMachineResponse", refused)


class _Unreachable:
    """A management API that does not answer."""

    def get(self, path: str) -> dict[str, Any]:
        raise Unreachable(f"GET {path}: connection refused")
