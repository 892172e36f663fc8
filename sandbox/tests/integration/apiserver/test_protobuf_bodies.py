"""Protobuf bodies of built-in kinds, as Cluster API's controllers send them (some
captured from its managers, some encoded by client-go: protobuf/README.md), decoded by
the stand-in as the real server decoded them: same status, same object, same field
ownership."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import requests
from machine_agent_sandbox.apiserver import ApiServer

from sandbox.tests.integration.apiserver import replay

BODIES = json.loads((Path(__file__).parent / "protobuf" / "bodies.json").read_text())["bodies"]


def comparable(body: dict[str, Any]) -> Any:
    body = json.loads(json.dumps(body))
    meta = body["metadata"]
    if meta.get("generateName"):
        meta["name"] = meta["generateName"] + "<suffix>"
    return replay.normalize(body)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with ApiServer(tmp_path_factory.mktemp("api"), controllers=False, ipam=False) as api:
        yield api


@pytest.mark.parametrize("case", BODIES, ids=[f"{c['kind']}-{i}" for i, c in enumerate(BODIES)])
def test_the_standin_decodes_a_protobuf_body_as_the_real_server(
        server: ApiServer, case: dict[str, Any]) -> None:
    answer = requests.request(
        case["method"], f"{server.url}{case['path']}?dryRun=All",
        data=base64.b64decode(case["body_base64"]), timeout=10, verify=str(server.ca_path),
        headers={"Authorization": f"Bearer {server.admin_token}",
                 "Content-Type": case["content_type"], "Accept": "application/json",
                 "User-Agent": ""})
    assert answer.status_code == case["answer"]["status"], answer.text
    assert comparable(answer.json()) == comparable(case["answer"]["body"])


def test_a_kind_it_does_not_decode_is_refused_as_before(server: ApiServer) -> None:
    """A Node in protobuf (not among the decoded kinds): 415, never a half-read object."""
    envelope = b"k8s\x00" + b"\n\n\n\x02v1\x12\x04Node" + b"\x12\x00"
    answer = requests.post(f"{server.url}/api/v1/nodes", data=envelope, timeout=10,
                           verify=str(server.ca_path),
                           headers={"Authorization": f"Bearer {server.admin_token}",
                                    "Content-Type": "application/vnd.kubernetes.protobuf"})
    assert answer.status_code == 415
