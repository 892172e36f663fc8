"""Nautobot answers that cannot be used are InvalidAllocation naming what is wrong, never
a traceback and never an address on the node, as with NetBox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from agent.errors import Reason
from agent.host import Host
from agent.ipam.base import ClaimRequest, InvalidAllocation, PluginEnv, open_plugin

PREFIX_ID = "5b2f4c1e-0a8d-4c3e-9f6a-1d2e3f4a5b6c"
TOKEN_FILE = "/etc/machine-agent/nautobot.token"


class FakeNautobot:
    """Answers the Nautobot plugin's requests: one prefix 192.0.2.0/24 without a gateway,
    no addresses, and `allocation` as the body of the answer to POST available-ips."""

    def __init__(self, allocation: bytes) -> None:
        self.allocation = allocation

    def request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        response = requests.Response()
        response.status_code = 201 if method == "POST" else 200
        if method == "POST":
            response._content = self.allocation
        elif "/prefixes/" in url:
            response._content = json.dumps({"results": [
                {"id": PREFIX_ID, "prefix": "192.0.2.0/24", "custom_fields": {}}]}).encode()
        else:
            response._content = b'{"results": []}'
        return response


HOSTILE = [
    (b"<html>proxy error</html>", "not JSON"),
    (b"{}", "field 'address'"),
    (b'[]', "where an object was expected"),
    (b'{"id": "a", "address": 5}', "field 'address'"),
    (b'{"id": "a", "address": "not an address"}', "unusable answer"),
    (b'{"id": "a", "address": "192.0.2.10/0"}', "prefix /0"),
    (b'{"id": "a", "address": "203.0.113.10/24"}', "outside pool"),
    (b'{"id": "a", "address": "192.0.2.10/24\\nAddress=203.0.113.1/24"}', "unusable answer"),
]


@pytest.mark.parametrize(("body", "problem"), HOSTILE)
def test_a_hostile_nautobot_answer_is_invalid_allocation(tmp_path: Path, body: bytes,
                                                          problem: str) -> None:
    host = Host(tmp_path)
    host.write_file(TOKEN_FILE, "0123456789abcdef0123456789abcdef01234567\n", mode=0o600)
    plugin = open_plugin("nautobot", {"nautobot": {"url": "http://127.0.0.1:9",
                                                   "tokenFile": TOKEN_FILE}},
                         PluginEnv(host))
    plugin.api._session = FakeNautobot(body)  # type: ignore[attr-defined]
    with pytest.raises(InvalidAllocation) as err:
        plugin.claim(ClaimRequest("uid/eth0/ipv4", "192.0.2.0/24", "ipv4", "eth0"))
    assert problem in str(err.value), str(err.value)
    assert "nautobot" in str(err.value) and "\n" not in str(err.value)
    assert err.value.reason == Reason.InvalidAllocation
