"""Doctor on the wire: a configured node in its own network namespace (the network
suite's segment) and NTP servers that answer or not (a real chronyd, -x)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.doctor.registry import diagnose
from agent.host import Host
from tests.integration.doctor.conftest import tree
from tests.integration.network.segment import (
    FAST,
    GATEWAY,
    MANAGEMENT,
    Segment,
    config,
    run_phase,
    segment,
)
from tests.integration.time.test_time_chronyd import DEAD_PORT, ntp_server  # noqa: F401

pytestmark = pytest.mark.allow_processes


@pytest.fixture
def seg() -> Iterator[Segment]:
    with segment() as s:
        yield s


def write_config(root: Path, spec: dict[str, Any]) -> None:
    path = root / "etc/machine-agent/config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"apiVersion": "machine-agent.io/v1alpha1",
                                    "kind": "AgentConfig", "spec": spec}))


NETWORK = {"conflictDetection": FAST,
           "verify": {"timeout": "3s", "managementEndpoint": MANAGEMENT},
           "interfaces": [{"name": "n0", "gateway": GATEWAY,
                           "addresses": [{"static": "192.0.2.10/24"}]}]}


def checks(root: Path, seg: Segment, phase: str) -> dict[str, dict[str, Any]]:
    found = diagnose(Host(root, netns=seg.node), phases=[phase])
    assert not found.errors
    return {c.name: c.as_dict() for c in found.checks}


def test_configured_namespace_passes_and_doctor_changes_nothing(seg: Segment,
                                                                tmp_path: Path) -> None:
    seg.listen()
    run_phase(tmp_path, seg, config({k: v for k, v in NETWORK.items()
                                     if k not in ("conflictDetection", "verify")}))
    write_config(tmp_path, {"network": NETWORK})
    seg.up_and_settled("n0")  # the kernel's own link-local address, before the snapshot
    state, files = seg.state(), tree(tmp_path)
    found = checks(tmp_path, seg, "network")
    assert (seg.state(), tree(tmp_path)) == (state, files)
    assert {name: c["status"] for name, c in found.items()} == {
        "interface:n0": "pass", "plan": "pass", f"gateway:{GATEWAY}": "pass",
        "address-conflict": "pass", "management-endpoint": "pass"}


def test_address_taken_by_another_host_is_a_conflict(seg: Segment, tmp_path: Path) -> None:
    run_phase(tmp_path, seg, config({k: v for k, v in NETWORK.items()
                                     if k not in ("conflictDetection", "verify")},
                                    endpoint=None))
    seg.router_ip("addr", "add", "192.0.2.10/24", "dev", "r0")
    write_config(tmp_path, {"network": {**NETWORK, "verify": {"timeout": "1s"}}})
    found = checks(tmp_path, seg, "network")
    assert found["address-conflict"]["status"] == "fail"
    assert "192.0.2.10" in found["address-conflict"]["seen"]


def test_missing_interface_names_the_interface_check(seg: Segment, tmp_path: Path) -> None:
    write_config(tmp_path, {"network": {
        **NETWORK, "interfaces": [{"name": "eth9", "addresses": [{"static": "192.0.2.10/24"}]}]}})
    state = seg.state()
    found = checks(tmp_path, seg, "network")
    assert seg.state() == state
    check = found["interface:eth9"]
    assert check["status"] == "fail" and "no link matches name eth9" in check["seen"]
    assert "spec.network.interfaces[].match" in check["fix"]
    assert found["plan"]["seen"].startswith("not checked")


def test_ntp_servers_each_with_offset_stratum_delay_and_the_dead_one_named(
        ntp_server: int, tmp_path: Path) -> None:  # noqa: F811
    write_config(tmp_path, {"time": {
        "servers": [{"host": "127.0.0.1", "port": ntp_server},
                    {"host": "127.0.0.1", "port": DEAD_PORT}],
        "chrony": {"commandAddress": str(tmp_path / "no-chronyd.sock")}}})
    found = {c.name: c.as_dict() for c in diagnose(Host(tmp_path), phases=["time"]).checks}
    good = found[f"server:127.0.0.1:{ntp_server}"]
    assert good["status"] == "pass"
    assert good["details"]["stratum"] == 8 and "offset" in good["details"]
    assert "delay" in good["details"]
    dead = found[f"server:127.0.0.1:{DEAD_PORT}"]
    assert dead["status"] == "fail" and "unreachable" in dead["seen"]
    assert "answers NTP" in dead["fix"]
    assert found["clock"]["status"] == "fail"
    assert "chronyd" in found["clock"]["fix"]
