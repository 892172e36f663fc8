"""A CAPI IPAddress whose address carries an IPv6 scope id with a newline (issue 26 #2),
or is no usable address (#6), through the API (the CRD's length limit lets it in): the
capi plugin refuses it as InvalidAllocation, so it never reaches a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.host import Host
from agent.ipam.base import ClaimRequest, InvalidAllocation, PluginEnv, open_plugin
from agent.kube.claims import claim_name
from tests.integration.ipam.conftest import MACHINE, Management

IPAM = "/apis/ipam.cluster.x-k8s.io/v1beta2"


@pytest.mark.parametrize(("family", "addresses", "prefix", "hostile", "problem"), [
    ("ipv6", ["2001:db8::10-2001:db8::20"], 64, "2001:db8::10%x\nallow all", "scope id"),
    ("ipv6", ["2001:db8::10-2001:db8::20"], 64, "::ffff:192.0.2.10", "IPv4-mapped"),
])
def test_a_hostile_ipaddress_is_refused_as_invalid_allocation(
        tmp_path: Path, management: Management, family: str, addresses: list[str],
        prefix: int, hostile: str, problem: str) -> None:
    pool = management.pool(f"hostile-{family}", addresses, prefix)
    plugin = open_plugin("capi", {"capi": {"timeout": "10s", "pools": {"p": {"name": pool}}}},
                         PluginEnv(Host(tmp_path), management.machine, management.client))
    key = f"{management.machine.uid}/eth0/{family}"
    request = ClaimRequest(claim_key=key, pool="p", family=family,  # type: ignore[arg-type]
                           interface="eth0", machine_namespace="", machine_name=MACHINE)
    plugin.claim(request)  # the provider's own answer is fine
    name = claim_name(MACHINE, "eth0", family, key)
    admin = management.admin
    path = f"{IPAM}/namespaces/{admin.ns}/ipaddresses/{name}"
    address = admin.call("GET", path)
    address["spec"]["address"] = hostile  # as a compromised or buggy provider writes it
    admin.call("PUT", path, address)
    assert admin.call("GET", path)["spec"]["address"] == hostile
    with pytest.raises(InvalidAllocation) as err:
        plugin.claim(request)
    assert problem in str(err.value)
    assert "\n" not in str(err.value)
