"""Values that would add a line to a file (issue 26 #2) and IPAM answers that cannot be
used (#6).

- Every renderer refuses a value holding a line or record separator, whatever checked it
  before: one check in the template environment, and in the files written without a
  template (/etc/hostname, /etc/hosts).
- An IPv6 scope id is refused wherever it means nothing (Python's parser takes anything
  after `%`, newlines included): in the configuration and in IPAM answers.
- IPAM answers with a /0 prefix or an IPv4-mapped IPv6 address are refused; a malformed
  NetBox answer is InvalidAllocation naming the field, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from agent.errors import ConfigError, Reason
from agent.host import Host
from agent.ipam.base import (
    Allocation,
    ClaimRequest,
    InvalidAllocation,
    PluginEnv,
    open_plugin,
    validate_allocation,
)
from agent.phases.network.model import build_plan
from agent.phases.network.render import render_hostname
from agent.templating import render
from tests.unit.hostile.config_doc import load_with
from tests.unit.network.netconfig import network_spec

SEPARATORS = ["\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029",
              "\x00"]


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(s):04X}" for s in SEPARATORS])
@pytest.mark.parametrize(("template", "values"), [
    ("time/chrony.sources.j2", {"source_lines": ["server ntp.example.net{}allow all"]}),
    ("time/timesyncd.conf.j2", {"hosts": ["ntp.example.net{}[Time]"]}),
    ("network/resolv.conf.j2", {"nameservers": ["192.0.2.53{}options debug"],
                                "search": ["example.net"]}),
    ("network/resolved.conf.j2", {"nameservers": ["192.0.2.53"],
                                  "search": ["example.net{}DNSSEC=no"]}),
])
def test_every_template_refuses_a_value_holding_a_separator(
        template: str, values: dict[str, list[str]], sep: str) -> None:
    hostile = {k: [v.format(sep) for v in vs] for k, vs in values.items()}
    with pytest.raises(ConfigError) as err:
        render(template, **hostile)
    message = str(err.value)
    assert f"rendering {template}" in message
    assert f"U+{ord(sep):04X}" in message
    assert not any(sep in str(e) for e in err.value.errors)  # the value is echoed escaped


def test_a_template_renders_a_plain_value_as_it_is() -> None:
    text = render("time/chrony.sources.j2", source_lines=["server ntp.example.net iburst"])
    assert "\nserver ntp.example.net iburst\n" in text


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(s):04X}" for s in SEPARATORS])
def test_hostname_and_hosts_written_without_a_template_refuse_a_separator(sep: str) -> None:
    plan = build_plan(network_spec({"hostname": "worker-1.example.net",
                                    "interfaces": [{"name": "eth0"}]}))
    assert render_hostname(plan, None)["/etc/hostname"] == "worker-1.example.net\n"
    hostile = type(plan)(**{**plan.__dict__, "hostname": f"worker-1{sep}127.0.0.1 evil"})
    with pytest.raises(ConfigError, match=r"spec\.network\.hostname"):
        render_hostname(hostile, None)


# -- scope ids in the configuration -------------------------------------------------------

SCOPED = "2001:db8::1%x\nallow all"
CONFIG_FIELDS = [
    (("time", "servers", 0, "host"), SCOPED),
    (("network", "dns", "nameservers", 0), SCOPED),
    (("network", "interfaces", 0, "gateway"), "2001:db8::1%eth0"),
    (("network", "interfaces", 0, "addresses", 0, "static"), "2001:db8::10%x\nallow/64"),
    (("network", "interfaces", 0, "routes", 0, "to"), "2001:db8:1::%x/64"),
    (("network", "interfaces", 0, "routes", 0, "via"), "192.0.2.1%x"),
    (("network", "dns", "nameservers", 0), "::ffff:192.0.2.53"),
]


@pytest.mark.parametrize(("field", "value"), CONFIG_FIELDS)
def test_a_scope_id_where_none_is_meaningful_is_refused_naming_the_field(
        tmp_path: Path, field: tuple[Any, ...], value: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_with(tmp_path, field, value)
    key = field[-1] if isinstance(field[-1], str) else field[-2]
    (problem,) = [e for e in err.value.errors if str(key) in e.path]
    assert "\n" not in str(problem)


def test_a_link_local_nameserver_naming_its_interface_is_taken(tmp_path: Path) -> None:
    load_with(tmp_path, ("network", "dns", "nameservers", 0), "fe80::53%eth0")


# -- IPAM answers ----------------------------------------------------------------------

V6 = ClaimRequest("uid/eth0/ipv6", "pool", "ipv6", "eth0")
V4 = ClaimRequest("uid/eth0/ipv4", "pool", "ipv4", "eth0")


@pytest.mark.parametrize(("request_", "address", "prefix", "gateway", "problem"), [
    (V6, "2001:db8::10%x\nallow all", 64, None, "scope id"),
    (V6, "2001:db8::10", 64, "2001:db8::1%eth0", "scope id"),
    (V4, "192.0.2.10", 0, None, "prefix /0"),
    (V6, "2001:db8::10", 0, None, "prefix /0"),
    (V6, "::ffff:192.0.2.10", 120, None, "IPv4-mapped"),
    (V4, "192.0.2.10", "24\n", None, "not a number"),
    (V4, 3221225994, 24, None, "not a string"),
])
def test_an_unusable_ipam_answer_is_invalid_allocation(
        request_: ClaimRequest, address: Any, prefix: Any, gateway: str | None,
        problem: str) -> None:
    alloc = Allocation(address, prefix, gateway, request_.family, handle="h",
                       backend="capi InClusterIPPool/p")
    with pytest.raises(InvalidAllocation) as err:
        validate_allocation(alloc, request_)
    assert problem in str(err.value) and "capi InClusterIPPool/p" in str(err.value)
    assert "\n" not in str(err.value)


class FakeNetBox:
    """Answers the NetBox plugin's requests from a table; `allocation` is the body of the
    answer to the allocation (POST available-ips)."""

    def __init__(self, allocation: bytes, results: bytes | None = None) -> None:
        self.allocation = allocation
        self.results = results

    def request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        response = requests.Response()
        response.status_code = 201 if method == "POST" else 200
        if method == "POST":
            response._content = self.allocation
        elif "/prefixes/" in url:
            response._content = json.dumps({"results": [
                {"id": 1, "prefix": "192.0.2.0/24", "custom_fields": {}}]}).encode()
        else:
            response._content = self.results or b'{"results": []}'
        return response


MALFORMED = [
    (b"<html>proxy error</html>", "not JSON"),
    (b"{}", "field 'address'"),
    (b'{"id": 7, "address": 5}', "field 'address'"),
    (b'{"id": "7", "address": "192.0.2.10/24"}', "field 'id'"),
    (b'{"id": 7, "address": "not an address"}', "unusable answer"),
    (b'{"id": 7, "address": "192.0.2.10/0"}', "prefix /0"),
    (b'[]', "where an object was expected"),
]


@pytest.mark.parametrize(("body", "problem"), MALFORMED)
def test_a_malformed_netbox_answer_is_invalid_allocation_naming_the_field(
        tmp_path: Path, body: bytes, problem: str) -> None:
    host = Host(tmp_path)
    host.write_file("/etc/machine-agent/netbox.token", "0123456789abcdef\n", mode=0o600)
    plugin = open_plugin("netbox", {"netbox": {
        "url": "http://127.0.0.1:9", "tokenFile": "/etc/machine-agent/netbox.token"}},
        PluginEnv(host))
    plugin.api._session = FakeNetBox(body)  # type: ignore[attr-defined]
    with pytest.raises(InvalidAllocation) as err:
        plugin.claim(ClaimRequest("uid/eth0/ipv4", "192.0.2.0/24", "ipv4", "eth0"))
    assert problem in str(err.value), str(err.value)
    assert err.value.reason == Reason.InvalidAllocation


@pytest.mark.parametrize("results", [b'{"results": "x"}', b'{"results": [3]}', b"[1]"])
def test_a_malformed_netbox_listing_is_invalid_allocation(tmp_path: Path,
                                                          results: bytes) -> None:
    host = Host(tmp_path)
    host.write_file("/etc/machine-agent/netbox.token", "0123456789abcdef\n", mode=0o600)
    plugin = open_plugin("netbox", {"netbox": {
        "url": "http://127.0.0.1:9", "tokenFile": "/etc/machine-agent/netbox.token"}},
        PluginEnv(host))
    plugin.api._session = FakeNetBox(b"{}", results)  # type: ignore[attr-defined]
    with pytest.raises(InvalidAllocation, match="netbox"):
        plugin.claim(ClaimRequest("uid/eth0/ipv4", "192.0.2.0/24", "ipv4", "eth0"))
