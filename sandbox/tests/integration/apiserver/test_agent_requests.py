"""The agent-corpus holds the requests the agent sends today: the agent's own code, driven
against a stand-in, sends exactly the recorded requests (the differential suite then
holds the stand-in's answers to the real server's). A change to what the agent sends
fails here until the case is recorded again against a real server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sandbox.tests.integration.apiserver import agent_requests, replay
from sandbox.tests.integration.apiserver.test_differential import recording_server

CASE = replay.AGENT_CORPUS / "r-agent-requests.json"
_CLAIM = re.compile(re.escape(agent_requests.MACHINE) + r"-eth0-v4-[0-9a-f]+")
_RV = re.compile(r"(resourceVersion=)\d+")


def shape(step: dict[str, Any]) -> str:
    """A request without what differs from server to server: uids (and the claim name
    hashed from the Machine's uid) and resourceVersions."""
    request = {k: v for k, v in step["request"].items() if k != "refs"}
    text = json.dumps(replay.normalize(request), sort_keys=True)
    text = _RV.sub(r"\1<rv>", _CLAIM.sub("<claim>", text))
    return replay._UUID.sub("<uid>", text)


def test_the_agent_sends_what_was_recorded_against_the_real_server(tmp_path: Path) -> None:
    server, target = recording_server(tmp_path / "api")
    try:
        sent = agent_requests.record(target.base, target.verify, target.tokens,
                                     tmp_path / "node")
    finally:
        server.stop()
    recorded = replay.load(CASE)["steps"]
    assert [s["label"] for s in sent] == [s["label"] for s in recorded]
    assert [shape(s) for s in sent] == [shape(s) for s in recorded]
    # and the stand-in answered each as the real server did, in status at least (the
    # whole answer is the differential suite's)
    assert [s["response"]["status"] for s in sent] == \
        [s["response"]["status"] for s in recorded]
