"""The capi plugin's claims as Cluster API sees them: owned by the Machine (so they go
with it), labelled with the cluster, named from the Machine, interface and family."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from machine_agent_sandbox.apiserver import ApiServer
from machine_agent_sandbox.pools import PoolClient

from agent.host import Host
from agent.ipam.base import ClaimRequest, IPAMPlugin, PluginEnv, PoolNotFound, open_plugin
from agent.kube.claims import claim_name
from tests.integration.ipam.conftest import MACHINE, Admin, Management


def request(key: str, interface: str = "eth0", pool: str = "v4") -> ClaimRequest:
    return ClaimRequest(claim_key=key, pool=pool, family="ipv4", interface=interface,
                        machine_namespace="", machine_name=MACHINE)


def plugin_for(tmp_path: Path, management: Management, pools: dict[str, object]) -> IPAMPlugin:
    return open_plugin("capi", {"capi": {"timeout": "10s", "pools": pools}},
                       PluginEnv(Host(tmp_path), management.machine, management.client))


def test_the_claim_is_owned_by_the_machine_labelled_and_names_the_pool(
        tmp_path: Path, management: Management) -> None:
    pool = management.pool("workers", ["192.0.2.10-192.0.2.20"], 24, gateway="192.0.2.1")
    plugin = plugin_for(tmp_path, management, {"v4": {"name": pool}})
    key = f"{management.machine.uid}/eth0/ipv4"
    alloc = plugin.claim(request(key))
    assert (alloc.address, alloc.prefix, alloc.gateway) == ("192.0.2.10", 24, "192.0.2.1")
    (claim,) = management.claims()
    meta = claim["metadata"]
    assert meta["name"] == alloc.handle == claim_name(MACHINE, "eth0", "ipv4", key)  # type: ignore[index]
    assert meta["name"].startswith(f"{MACHINE}-eth0-v4-")  # type: ignore[index]
    assert meta["labels"] == {"cluster.x-k8s.io/cluster-name": "c1"}  # type: ignore[index]
    (owner,) = meta["ownerReferences"]  # type: ignore[index]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Machine", MACHINE,
                                                            management.machine.uid)
    assert claim["spec"] == {"clusterName": "c1", "poolRef": {  # type: ignore[index]
        "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": pool}}


def test_a_missing_pool_is_pool_not_found_and_leaves_no_claim(
        tmp_path: Path, management: Management) -> None:
    plugin = plugin_for(tmp_path, management, {})
    with pytest.raises(PoolNotFound) as info:
        plugin.claim(request("uid/eth0/ipv4", pool="no-such-pool"))
    assert "PoolNotReady" in info.value.message and "no-such-pool" in info.value.message
    assert management.claims() == []


def test_deleting_the_machine_deletes_its_claims_and_frees_the_addresses(
        tmp_path: Path, management: Management) -> None:
    pool = management.pool("workers", ["192.0.2.10-192.0.2.20"], 24)
    plugin = plugin_for(tmp_path, management, {"v4": {"name": pool}})
    plugin.claim(request("uid/eth0/ipv4"))
    plugin.claim(request("uid/eth1/ipv4", interface="eth1"))
    assert len(management.claims()) == 2
    admin = management.admin
    admin.call("DELETE", f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{admin.ns}/machines/"
                         f"{MACHINE}")
    deadline = time.monotonic() + 20
    while (management.claims() or admin.call(
            "GET", f"/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/{admin.ns}/ipaddresses"
    )["items"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert management.claims() == []
    assert admin.call("GET", f"/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/{admin.ns}"
                             "/ipaddresses")["items"] == []


def test_the_provider_the_test_plays_on_a_real_server_fulfils_claims(tmp_path: Path) -> None:
    """Against MACHINE_AGENT_TEST_KUBECONFIG no provider runs and the test plays it;
    checked here on the stand-in with its own pool controller turned off."""
    server = ApiServer(tmp_path / "api", ipam=False).start()
    try:
        admin = Admin(server.url, str(server.ca_path),
                      {"Authorization": f"Bearer {server.admin_token}"}, ns="default")
        ipam = "/apis/ipam.cluster.x-k8s.io"
        admin.create(f"{ipam}/v1alpha2/namespaces/default/inclusterippools", {
            "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
            "metadata": {"name": "p"}, "spec": {"addresses": ["192.0.2.1-192.0.2.2"],
                                                 "prefix": 24, "gateway": "192.0.2.1"}})
        for name in ("a", "b"):
            admin.create(f"{ipam}/v1beta2/namespaces/default/ipaddressclaims", {
                "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
                "metadata": {"name": name}, "spec": {"poolRef": {
                    "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool",
                    "name": "p"}}})
        with PoolClient(admin) as provider:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                claims = {c["metadata"]["name"]: c.get("status") or {} for c in admin.call(
                    "GET", f"{ipam}/v1beta2/namespaces/default/ipaddressclaims")["items"]}
                if all(s.get("conditions") for s in claims.values()):
                    break
                time.sleep(0.1)
        assert provider.errors == []
        assert claims["a"]["addressRef"] == {"name": "a"}
        address = admin.call("GET", f"{ipam}/v1beta2/namespaces/default/ipaddresses/a")
        assert (address["spec"]["address"], address["spec"]["gateway"]) == ("192.0.2.2",
                                                                            "192.0.2.1")
        assert claims["b"]["conditions"][0]["reason"] == "PoolExhausted"
    finally:
        server.stop()


def test_a_provider_that_cannot_allocate_is_reported_at_once_with_its_message(
        tmp_path: Path, management: Management) -> None:
    from agent.ipam.base import AllocationFailed

    pool = management.pool("broken", ["192.0.2.20-192.0.2.30"], 40)  # no IPv4 prefix
    plugin = plugin_for(tmp_path, management, {"v4": {"name": pool}})  # waits up to 10s
    started = time.monotonic()
    with pytest.raises(AllocationFailed) as info:
        plugin.claim(request("uid/eth0/ipv4"))
    assert time.monotonic() - started < 5  # not after the wait, as "did not answer"
    assert info.value.reason == "AllocationFailed"
    assert "(AllocationFailed): failed to create or patch address" in info.value.message
    assert management.claims() == []  # nothing half-created


def test_the_claims_owner_reference_names_the_machine_in_the_version_it_was_read(
        tmp_path: Path, management: Management) -> None:
    import dataclasses

    pool = management.pool("workers", ["192.0.2.10-192.0.2.20"], 24)
    machine = dataclasses.replace(management.machine, api_version="v1beta1")  # CAPI < 1.11
    plugin = open_plugin("capi", {"capi": {"timeout": "10s", "pools": {"v4": {"name": pool}}}},
                         PluginEnv(Host(tmp_path), machine, management.client))
    plugin.claim(request(f"{machine.uid}/eth0/ipv4"))
    (claim,) = management.claims()
    (owner,) = claim["metadata"]["ownerReferences"]  # type: ignore[index]
    assert owner["apiVersion"] == "cluster.x-k8s.io/v1beta1"
