"""The throwaway ADD/CHECK/DEL proof with the real Debian plugins, run in a test "node"
namespace through Host.netns: the bridge lives there, never in the machine's own."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from agent.config.cni import CheckSpec, ConflistSpec, TemplateValues
from agent.host import Host
from agent.phases.cni.check import CNIBrokenError, prove
from agent.phases.cni.conflist import examine, render
from agent.phases.cni.result import Proof
from tests.cni_fixtures import (
    check_namespaces,
    host_links,
    install_image_plugins,
    ip,
    netns_names,
    node_namespace,
    unique,
)

BIN = "/opt/cni/bin"


def bridge_list(bridge: str, subnet: str = "203.0.113.0/24", version: str = "1.0.0",
                **values: Any) -> dict[str, Any]:
    return render(ConflistSpec(template="bridge", values=TemplateValues(
        name="checknet", bridge=bridge, subnet=subnet, cni_version=version, **values)))


def check(host: Host, doc: dict[str, Any]) -> Proof:
    found = examine(doc, BIN, {"bridge", "host-local", "portmap", "loopback"}, [])
    assert not found.problems
    return prove(host, doc, BIN, CheckSpec(), found.ranges)


@pytest.mark.allow_processes
@pytest.mark.parametrize("version", ["1.0.0", "0.4.0", "0.3.1"])
def test_add_check_del_give_the_pod_an_address_from_the_range(tmp_path: Path,
                                                              version: str) -> None:
    install_image_plugins(tmp_path)
    bridge = unique("mabr")
    with node_namespace() as node:
        host = Host(tmp_path, netns=node)
        result = check(host, bridge_list(bridge, version=version,
                                         subnet="2001:db8:42::/64" if version == "0.4.0"
                                         else "203.0.113.0/24"))
        # CHECK exists from CNI 0.4.0 on; a runtime skips it for older lists, so do we
        expected = ["ADD", "CHECK", "DEL"] if version != "0.3.1" else ["ADD", "DEL"]
        assert result.commands == expected
        prefix = "2001:db8:42::" if version == "0.4.0" else "203.0.113."
        assert str(result.address).startswith(prefix)
        assert bridge in ip("-n", node, "-o", "link", "show").stdout
        # DEL released the address: only the bridge is left in the node namespace
        node_links = ip("-n", node, "-o", "link", "show").stdout
        assert "veth" not in node_links
    # the pod namespace is gone (named, not counted: a concurrent run may hold its own)
    assert result.namespace not in netns_names()
    assert bridge not in host_links()  # never in the machine's own namespace
    assert not any((tmp_path / "var/lib/machine-agent/cni-check").iterdir())


@pytest.mark.allow_processes
def test_a_failing_plugin_is_reported_with_its_own_error_json(tmp_path: Path) -> None:
    install_image_plugins(tmp_path)
    doc = bridge_list(unique("mabr"))
    doc["plugins"][0]["vlan"] = 5000  # the bridge plugin refuses VLAN ids above 4094
    namespaces = check_namespaces()
    with node_namespace() as node, pytest.raises(CNIBrokenError) as info:
        check(Host(tmp_path, netns=node), doc)
    message = str(info.value)
    assert "CNI ADD failed in plugin 'bridge'" in message
    error = json.loads(message.split(": ", 1)[1].split(" (the plugin's own error")[0])
    assert error == {"code": 999,  # the plugin's own words
                     "msg": "invalid VLAN ID 5000 (must be between 0 and 4094)"}
    assert "fix spec.cni.conflist (its template values or inline list)" in message
    assert "spec.cni.check.enabled: false" in message
    assert check_namespaces() == namespaces  # cleaned up after the failure too


@pytest.mark.allow_processes
def test_an_address_outside_the_configured_ranges_is_caught(tmp_path: Path) -> None:
    install_image_plugins(tmp_path)
    doc = bridge_list(unique("mabr"))
    found = examine(doc, BIN, {"bridge", "host-local", "portmap", "loopback"}, [])
    other = examine(bridge_list("x", subnet="198.51.100.0/24"), BIN, set(), []).ranges
    bridge = doc["plugins"][0]["bridge"]
    with node_namespace() as node:
        with pytest.raises(CNIBrokenError, match="outside the configured"):
            prove(Host(tmp_path, netns=node), doc, BIN, CheckSpec(), other)
        # the failed check leaves nothing behind, not even the bridge it created
        assert bridge not in ip("-n", node, "-o", "link", "show").stdout
    assert found.ranges  # the list's own ranges would have been fine


@pytest.mark.allow_processes
def test_a_check_killed_between_port_and_mac_leaves_no_broken_bridge(tmp_path: Path) -> None:
    """Killed after the bridge plugin attached the pod's veth and before it set the
    bridge's own MAC: with the pod gone the kernel gives the bridge the all-zero MAC and
    every later ADD fails ("could not set bridge's mac"). The next check removes the bridge
    its killed predecessor recorded as its own, and proves the list."""
    install_image_plugins(tmp_path)
    bridge = unique("mabr")
    token = secrets.token_hex(4)
    left = tmp_path / f"var/lib/machine-agent/cni-check/ma-cni-check-{token}"
    left.mkdir(parents=True)
    (left / ".machine-agent-cni-check").write_text(f"ma-cni-check-{token}\nbridge {bridge}\n")
    with node_namespace() as node:
        ip("-n", node, "link", "add", bridge, "type", "bridge")
        ip("-n", node, "link", "add", "ma-pod0", "type", "veth", "peer", "name", "ma-pod1")
        ip("-n", node, "link", "set", "ma-pod0", "master", bridge)
        ip("-n", node, "link", "delete", "ma-pod0")  # the pod's namespace went away
        assert "00:00:00:00:00:00" in ip("-n", node, "link", "show", bridge).stdout
        result = check(Host(tmp_path, netns=node), bridge_list(bridge))
        shown = ip("-n", node, "link", "show", bridge).stdout
    assert result.commands == ["ADD", "CHECK", "DEL"]
    assert "00:00:00:00:00:00" not in shown
    assert not left.exists()


@pytest.mark.allow_processes
def test_a_shared_data_dir_loses_only_the_agents_own_leftovers(tmp_path: Path) -> None:
    """dataDir may hold anything (a user pointed it at /var/lib): only a leftover named
    as the agent names its checks and holding its marker is removed, with its namespace."""
    install_image_plugins(tmp_path)
    data = tmp_path / "var/lib"
    foreign = {"dpkg/status": "installed", "important/data": "keep",
               "0a1b2c3d/checknet/203.0.113.2": "c1",  # host-local-like, old naming
               "ma-cni-check-0123abcd/note": "no marker: not the agent's",
               "ma-cni-check-4567cdef/.machine-agent-cni-check": "ma-cni-check-other\n"}
    for rel, text in foreign.items():
        (data / rel).parent.mkdir(parents=True, exist_ok=True)
        (data / rel).write_text(text)
    token = secrets.token_hex(4)
    left = data / f"ma-cni-check-{token}"
    (left / "checknet").mkdir(parents=True)
    (left / ".machine-agent-cni-check").write_text(f"ma-cni-check-{token}\n")
    (left / "checknet/203.0.113.7").write_text("machine-agent-check-" + token)
    ip("netns", "add", f"ma-cni-check-{token}")
    try:
        with node_namespace() as node:
            result = prove(Host(tmp_path, netns=node), bridge_list(unique("mabr")), BIN,
                           CheckSpec(data_dir="/var/lib"),
                           examine(bridge_list("x"), BIN, set(), []).ranges)
        leftover_namespace = f"ma-cni-check-{token}" in netns_names()
    finally:
        ip("netns", "delete", f"ma-cni-check-{token}", check=False)
    assert result.commands == ["ADD", "CHECK", "DEL"]
    assert {rel: (data / rel).read_text() for rel in foreign} == foreign
    assert not left.exists()  # the agent's own leftover, cleaned up
    assert not leftover_namespace
    assert sorted(p.name for p in data.iterdir()) == [
        "0a1b2c3d", "dpkg", "important", "ma-cni-check-0123abcd", "ma-cni-check-4567cdef"]


@pytest.mark.allow_processes
def test_a_check_killed_while_removing_its_data_leaves_nothing_after_the_next(
        tmp_path: Path) -> None:
    """Removing a tree takes the marker before the directories that held it: a check
    killed midway would leave an unmarked directory no later check may touch. The data
    directory is renamed first, in one step, to the finished-with name; the next check
    removes what a kill left of that, and only that."""
    install_image_plugins(tmp_path)
    data = tmp_path / "var/lib/machine-agent/cni-check"
    token = secrets.token_hex(4)
    half_removed = data / f".ma-cni-check-{token}.gone"
    (half_removed / "checknet").mkdir(parents=True)  # the marker went, the rest did not
    (data / ".ma-cni-check-notatoken.gone").mkdir()  # not a name the agent gives
    with node_namespace() as node:
        result = check(Host(tmp_path, netns=node), bridge_list(unique("mabr")))
    assert result.commands == ["ADD", "CHECK", "DEL"]
    assert sorted(p.name for p in data.iterdir()) == [".ma-cni-check-notatoken.gone"]
