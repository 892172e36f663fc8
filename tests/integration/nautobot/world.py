"""The test Nautobot as the tests see it (started by up.sh): its URL and token, its
addresses, and a reset that puts the test prefixes back as the conformance suite wants
them (v4 192.0.2.0/24, v6 2001:db8:10::/64 and small 198.51.100.0/28, each with its
gateway in the prefix's `gateway` custom field) with no address in them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

ENV = Path(os.environ.get("NAUTOBOT_HOME", "/var/tmp/machine-agent-nautobot")) / "env"
UP = "sudo bash tests/integration/nautobot/up.sh"
PREFIXES = {"192.0.2.0/24": "192.0.2.1", "2001:db8:10::/64": "2001:db8:10::1",
            "198.51.100.0/28": "198.51.100.1"}


@dataclass(frozen=True)
class Nautobot:
    url: str
    token: str

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        session = requests.Session()
        session.trust_env = False
        return session.request(method, self.url + path, timeout=30, **kwargs, headers={
            "Authorization": f"Token {self.token}", "Accept": "application/json"})

    def results(self, path: str, **params: str) -> list[dict[str, Any]]:
        r = self.call("GET", path, params={**params, "limit": "1000"})
        r.raise_for_status()
        return list(r.json()["results"])

    def addresses(self, **params: str) -> list[dict[str, Any]]:
        return self.results("/api/ipam/ip-addresses/", **params)

    def reset(self) -> None:
        """No address in the test prefixes; the prefixes as PREFIXES says."""
        ids = [{"id": r["id"]} for r in self.addresses()]
        if ids:
            assert self.call("DELETE", "/api/ipam/ip-addresses/", json=ids).status_code == 204
        have = {r["prefix"] for r in self.results("/api/ipam/prefixes/")}
        for prefix, gateway in PREFIXES.items():
            if prefix not in have:
                made = self.call("POST", "/api/ipam/prefixes/", json={
                    "prefix": prefix, "status": {"name": "Active"},
                    "namespace": {"name": "Global"}, "custom_fields": {"gateway": gateway}})
                assert made.status_code == 201, made.text


def running_nautobot() -> Nautobot:
    """The running test Nautobot, or a test failure that says how to start it."""
    if not ENV.exists():
        pytest.fail(f"Nautobot is not up: {ENV} does not exist; run `{UP}` first "
                    "(CI does it in .ci/services.d/nautobot.sh)", pytrace=False)
    env = dict(line.split("=", 1) for line in ENV.read_text().splitlines() if "=" in line)
    server = Nautobot(env["NAUTOBOT_URL"], env["NAUTOBOT_TOKEN"])
    try:
        status = server.call("GET", "/api/status/").status_code
    except requests.RequestException as err:
        pytest.fail(f"Nautobot is not up at {server.url} ({type(err).__name__}); run `{UP}`",
                    pytrace=False)
    if status != 200:
        pytest.fail(f"Nautobot at {server.url} answered {status}; run `{UP}`", pytrace=False)
    return server
