"""The Runtime SDK's wire format of the in-place update hooks (Cluster API
api/runtime/hooks/v1alpha1: inplaceupdate_types.go, discovery_types.go; the requests
recorded from Cluster API v1.14's controllers are in tests/fixtures/real-capi)."""

from __future__ import annotations

import base64
import json
from typing import Any

GROUP_VERSION = "hooks.runtime.cluster.x-k8s.io/v1alpha1"
HANDLERS = {"CanUpdateMachine": "can-update-machine",
            "CanUpdateMachineSet": "can-update-machineset",
            "UpdateMachine": "update-machine"}
"""Hook -> the handler name this extension registers for it."""
TIMEOUT_SECONDS = 10
"""What discovery asks Cluster API to allow per call; every handler answers well within
it (UpdateMachine never waits for the node: it answers retryAfterSeconds)."""

Obj = dict[str, Any]


def path_of(hook: str) -> str:
    """The handler's path, as Cluster API's catalog builds it (GVHToPath)."""
    return f"/{GROUP_VERSION}/{hook.lower()}/{HANDLERS[hook]}"


def discovery() -> Obj:
    return {"apiVersion": GROUP_VERSION, "kind": "DiscoveryResponse", "status": "Success",
            "handlers": [{"name": name, "requestHook": {"apiVersion": GROUP_VERSION,
                                                         "hook": hook},
                          "timeoutSeconds": TIMEOUT_SECONDS, "failurePolicy": "Fail"}
                         for hook, name in HANDLERS.items()]}


def json_patch(ops: list[Obj]) -> Obj:
    """A Patch: patchType and the JSON patch as bytes (base64 in JSON, Go's []byte)."""
    return {"patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(ops).encode()).decode()}


RETRYING = frozenset({"UpdateMachineResponse"})
"""Responses of the hooks Cluster API calls again (CommonRetryResponse), where
retryAfterSeconds is required, a Failure's too (the Runtime SDK's OpenAPI document)."""


def failure(kind: str, message: str) -> Obj:
    out: Obj = {"apiVersion": GROUP_VERSION, "kind": kind, "status": "Failure",
                "message": message}
    if kind in RETRYING:
        out["retryAfterSeconds"] = 0
    return out
