"""Rendered files parsed back hold exactly the plan: nothing lost, nothing added. The
parsers and the checks are the ones the hostile-value property uses
(tests/unit/hostile/test_renderer_roundtrip.py); here they run over every golden case."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.phases.network.model import NetworkPlan, build_plan
from agent.phases.network.render import (
    NETPLAN_FILE,
    render_dns,
    render_netplan,
    render_networkd,
)
from tests.unit.hostile.test_renderer_roundtrip import (
    assert_netplan_holds,
    assert_networkd_holds,
    ini_values,
    parse_systemd,
)
from tests.unit.network.netconfig import network_spec

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "input.yaml").exists())


def plan_of(case: str) -> NetworkPlan:
    return build_plan(network_spec(yaml.safe_load((GOLDEN / case / "input.yaml").read_text())))


@pytest.mark.parametrize("case", CASES)
def test_networkd_files_parse_back_to_the_plan(case: str) -> None:
    plan = plan_of(case)
    assert_networkd_holds(plan, render_networkd(plan))


@pytest.mark.parametrize("case", CASES)
def test_netplan_yaml_parses_back_to_the_plan(case: str) -> None:
    plan = plan_of(case)
    assert_netplan_holds(plan, render_netplan(plan)[NETPLAN_FILE])


def test_dns_files_hold_every_server_and_domain_once() -> None:
    plan = plan_of("several-dns")
    resolved = parse_systemd(render_dns(plan, "resolved")[
        "/etc/systemd/resolved.conf.d/machine-agent.conf"])
    assert ini_values(resolved, "Resolve", "DNS") == [" ".join(plan.nameservers)]
    assert ini_values(resolved, "Resolve", "Domains") == ["example.net corp.example.net"]
    single = plan_of("single-nic-static")
    conf = render_dns(single, "resolv.conf")["/etc/resolv.conf"]
    assert [line for line in conf.splitlines() if not line.startswith("#")] == [
        "nameserver 192.0.2.53"]
