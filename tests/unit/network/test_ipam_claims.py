"""Addresses from IPAM: `plan` shows what would be claimed from which pool without
claiming; `apply` claims once per Machine UID + interface + family and renders the
allocation (address, gateway, DNS)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from agent.config import AgentConfig
from agent.config.fields import Decoder
from agent.errors import AgentError, Reason
from agent.host import Host
from agent.ipam import ledger
from agent.ipam.base import Allocation, ClaimRequest, PluginEnv
from agent.kube.facts import MachineFacts
from agent.phases.base import PhaseContext
from agent.phases.network import NetworkPhase, claims
from agent.phases.network.result import ClaimedAddress
from agent.state import Journal


class FakePlugin:
    name = "fake"

    def __init__(self, answer: Allocation) -> None:
        self.answer = answer
        self.requests: list[ClaimRequest] = []
        self.envs: list[PluginEnv] = []

    def claim(self, request: ClaimRequest) -> Allocation:
        self.requests.append(request)
        return self.answer

    def release(self, allocation: Allocation) -> None:
        raise AssertionError("the network phase never releases")


GOOD = Allocation("198.51.100.23", 24, "198.51.100.1", "ipv4", ("198.51.100.53",),
                  handle="fake/23", backend="fake")


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> FakePlugin:
    fake = FakePlugin(GOOD)

    def open_fake(name: str, settings: dict[str, Any], env: PluginEnv) -> FakePlugin:
        assert name == "fake"
        fake.envs.append(env)
        return fake

    monkeypatch.setattr(claims, "open_plugin", open_fake)
    return fake


def agent_config(addresses: list[dict[str, Any]]) -> AgentConfig:
    doc = {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig", "spec": {
        "network": {"interfaces": [{"name": "eth0", "addresses": addresses}]}}}
    decoder = Decoder()
    cfg = decoder.decode_object(AgentConfig, doc, "")
    assert not decoder.errors and isinstance(cfg, AgentConfig)
    return cfg


def context(root: Path, cfg: AgentConfig, machine: MachineFacts | None,
            read_only: bool = False) -> PhaseContext:
    host = Host(root)
    journal = Journal.load(host)
    journal.start("network", "test")
    return PhaseContext(cfg, host.read_only_view() if read_only else host, journal, {},
                        lambda message: None, logging.getLogger("test"), machine)


MACHINE = MachineFacts("site-a", "worker-12", "5f0c-uid", "c1")
IPAM = [{"ipam": {"plugin": "fake", "pool": "workers-v4"}}]


def test_plan_names_the_pool_without_claiming(tmp_path: Path, plugin: FakePlugin) -> None:
    plan = NetworkPhase().plan(context(tmp_path, agent_config(IPAM), MACHINE, read_only=True))
    assert ("claim an ipv4 address for eth0 from pool 'workers-v4' (IPAM plugin fake)"
            in plan.notes)
    assert plugin.requests == []


def test_apply_claims_by_machine_interface_and_family_and_renders_it(
        tmp_path: Path, plugin: FakePlugin) -> None:
    cfg = agent_config([{"static": "192.0.2.10/24"}, *IPAM])
    ctx = context(tmp_path, cfg, MACHINE)
    phase = NetworkPhase()
    phase.apply(ctx, phase.plan(ctx))
    (request,) = plugin.requests
    assert request.claim_key == "5f0c-uid/eth0/ipv4"
    assert (request.pool, request.family, request.interface) == ("workers-v4", "ipv4", "eth0")
    assert (request.machine_namespace, request.machine_name) == ("site-a", "worker-12")
    network = (tmp_path / "etc/systemd/network/10-machine-agent-eth0.network").read_text()
    assert "Address=192.0.2.10/24\nAddress=198.51.100.23/24\n" in network
    assert "Gateway=198.51.100.1" in network
    resolved = (tmp_path / "etc/systemd/resolved.conf.d/machine-agent.conf").read_text()
    assert "DNS=198.51.100.53" in resolved
    result = phase.verify(ctx, phase.plan(ctx))
    assert result.addresses == {"eth0": ["192.0.2.10/24", "198.51.100.23/24"]}
    assert result.claimed == [ClaimedAddress("eth0", "198.51.100.23/24", "198.51.100.1",
                                             "fake", "fake/23")]
    (env,) = plugin.envs
    assert env.machine == MACHINE and env.host is ctx.host


def test_each_claim_is_in_the_journal_at_once_for_reset(tmp_path: Path,
                                                        plugin: FakePlugin) -> None:
    ctx = context(tmp_path, agent_config(IPAM), MACHINE)
    NetworkPhase().apply(ctx, NetworkPhase().plan(ctx))
    (held,) = ledger.held(Journal.load(Host(tmp_path)))  # as a later process reads it
    assert (held.plugin, held.claim_key, held.pool) == ("fake", "5f0c-uid/eth0/ipv4",
                                                        "workers-v4")
    assert held.allocation == GOOD


def test_without_a_machine_the_claim_key_is_the_machine_id(tmp_path: Path,
                                                           plugin: FakePlugin) -> None:
    Host(tmp_path).write_file("/etc/machine-id", "0123456789abcdef0123456789abcdef\n")
    ctx = context(tmp_path, agent_config(IPAM), None)
    NetworkPhase().apply(ctx, NetworkPhase().plan(ctx))
    assert plugin.requests[0].claim_key == "0123456789abcdef0123456789abcdef/eth0/ipv4"


def test_no_machine_and_no_machine_id_is_a_clear_error(tmp_path: Path,
                                                       plugin: FakePlugin) -> None:
    ctx = context(tmp_path, agent_config(IPAM), None)
    with pytest.raises(AgentError) as info:
        NetworkPhase().apply(ctx, NetworkPhase().plan(ctx))
    assert info.value.reason == Reason.MachineNotFound
    assert plugin.requests == []


def test_unusable_allocation_is_refused_before_anything_is_written(
        tmp_path: Path, plugin: FakePlugin) -> None:
    plugin.answer = Allocation("198.51.100.23", 24, "203.0.113.1", "ipv4", backend="fake")
    ctx = context(tmp_path, agent_config(IPAM), MACHINE)
    with pytest.raises(AgentError) as info:
        NetworkPhase().apply(ctx, NetworkPhase().plan(ctx))
    assert info.value.reason == Reason.InvalidAllocation
    assert "gateway 203.0.113.1 is outside 198.51.100.0/24" in info.value.message
    assert not (tmp_path / "etc/systemd").exists()


def test_two_ipam_addresses_of_one_family_on_one_interface_are_refused() -> None:
    decoder = Decoder()
    decoder.decode_object(AgentConfig, {
        "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
        "spec": {"network": {"interfaces": [{"name": "eth0", "addresses": IPAM * 2}]}}}, "")
    assert any("interfaces[0].addresses[1].ipam: a second ipv4 address" in str(e)
               for e in decoder.errors)
