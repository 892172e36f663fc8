"""The conflist: config checks, templates, and refusal before anything is written."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.config import load_config
from agent.config.cni import ConflistSpec, TemplateValues
from agent.config.sources import FileSource
from agent.errors import ConfigError
from agent.host import Host
from agent.orchestrator import Orchestrator
from agent.phases.cni import CNIPhase
from agent.phases.cni.conflist import examine, render
from agent.phases.network.result import NetworkResult
from tests.cni_fixtures import snapshot

ALL = {"bridge", "host-local", "portmap", "loopback"}


def load(tmp_path: Path, cni: dict[str, Any], network: dict[str, Any] | None = None) -> Any:
    doc = {"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
           "spec": {"cni": cni, **({"network": network} if network else {})}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_config(Host(tmp_path), [FileSource(str(path), required=True,
                                                   outside_root=True)])


def test_config_lists_every_cni_mistake_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, {
            "binDir": "relative/bin",
            "plugins": {"source": "url", "url": "http://example.org/cni.tgz"},
            "conflist": {"inline": {"cniVersion": "9.9", "name": "bad name",
                                    "plugins": [{"type": "../../bin/sh"}, {}]}},
            "manifest": {"url": "https://example.org/cni.yaml"},
        })
    shown = {e.path: e.message for e in info.value.errors}
    assert "spec.cni.binDir" in shown
    assert "not an https:// URL" in shown["spec.cni.plugins.url"]
    assert shown["spec.cni.conflist.inline.cniVersion"] == "'9.9' is not a supported CNI version"
    assert "not a CNI network name" in shown["spec.cni.conflist.inline.name"]
    assert "not a plugin name" in shown["spec.cni.conflist.inline.plugins[0].type"]
    assert shown["spec.cni.conflist.inline.plugins[1].type"] == "is required"
    assert shown["spec.cni.manifest.sha256"] == "is required with url"


def test_a_bundle_without_its_checksum_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, {"plugins": {"source": "bundle", "path": "/srv/cni.tgz"}})
    assert [e.path for e in info.value.errors] == ["spec.cni.plugins.sha256"]


def test_bridge_template_renders_the_reference_chain() -> None:
    doc = render(ConflistSpec(template="bridge", values=TemplateValues(
        name="pods", bridge="cni0", subnet="198.51.100.0/24", gateway="198.51.100.1",
        mtu=1450, ip_masq=False)))
    assert doc == {
        "cniVersion": "1.0.0", "name": "pods",
        "plugins": [
            {"type": "bridge", "bridge": "cni0", "isGateway": True, "isDefaultGateway": True,
             "ipMasq": False, "hairpinMode": True, "mtu": 1450,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": "198.51.100.0/24",
                                                         "gateway": "198.51.100.1"}]]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
            {"type": "loopback"},
        ]}


def test_flannel_template_delegates_and_needs_flannel_and_bridge() -> None:
    doc = render(ConflistSpec(template="flannel", values=TemplateValues(
        name="cbr0", cni_version="0.3.1")))
    assert doc["plugins"][0] == {"type": "flannel", "delegate": {
        "hairpinMode": True, "isDefaultGateway": True}}
    found = examine(doc, "/opt/cni/bin", {"portmap"}, [])
    assert found.problems == [
        "plugins[0].type: plugin 'flannel' is not an executable in /opt/cni/bin",
        "plugins[0].delegate.type: plugin 'bridge' is not an executable in /opt/cni/bin",
        "plugins[0].delegate.ipam.type: plugin 'host-local' is not an executable in "
        "/opt/cni/bin"]


def inline(*ranges: dict[str, Any], ipam_type: str = "host-local") -> dict[str, Any]:
    return {"cniVersion": "1.0.0", "name": "n", "plugins": [
        {"type": "bridge", "ipam": {"type": ipam_type, "ranges": [list(ranges)]}}]}


@pytest.mark.parametrize(("doc", "problem"), [
    (inline({"subnet": "198.51.100.0/24"}, {"subnet": "198.51.100.128/25"}),
     "ranges[0][1]: 198.51.100.128/25 overlaps 198.51.100.0/24"),
    (inline({"subnet": "198.51.100.0/24", "rangeStart": "198.51.100.200",
             "rangeEnd": "198.51.100.100"}), "rangeStart 198.51.100.200 is after rangeEnd"),
    (inline({"subnet": "198.51.100.0/24", "gateway": "203.0.113.1"}),
     "gateway: 203.0.113.1 is outside the subnet 198.51.100.0/24"),
    (inline({"subnet": "198.51.100.0/31"}), "198.51.100.0/31 is too small to allocate from"),
    (inline({"subnet": "not-a-net"}), "'not-a-net' is not a network"),
    (inline({"subnet": "198.51.100.0/24"}, ipam_type="whereabouts"),
     "plugins[0].ipam.type: plugin 'whereabouts' is not an executable"),
])
def test_unsound_ipam_is_named_precisely(doc: dict[str, Any], problem: str) -> None:
    found = examine(doc, "/opt/cni/bin", ALL, [])
    assert any(problem in p for p in found.problems), found.problems


def bridge_config(subnet: str) -> dict[str, Any]:
    return {"conflist": {"template": "bridge", "values": {"subnet": subnet}}}


def plugins_in(root: Path, names: set[str] = ALL) -> None:
    """Executables standing for the plugins in the default binDir under `root`."""
    bin_dir = root / "opt/cni/bin"
    bin_dir.mkdir(parents=True)
    for name in names:
        (bin_dir / name).write_bytes(b"\x7fELF")
        (bin_dir / name).chmod(0o755)


@pytest.mark.parametrize("case", ["static address", "network phase result",
                                  "missing plugin"])
def test_refused_list_fails_the_phase_and_writes_nothing(tmp_path: Path, case: str) -> None:
    root = tmp_path / "root"
    plugins_in(root, ALL - ({"portmap"} if case == "missing plugin" else set()))
    network = {"interfaces": [{"name": "eth0", "addresses": [
        {"static": "2001:db8:1::10/64"}]}]}
    subnet = {"static address": "2001:db8:1::/64", "network phase result": "192.0.2.0/24",
              "missing plugin": "198.51.100.0/24"}[case]
    loaded = load(tmp_path, bridge_config(subnet), network)
    host = Host(root)
    orchestrator = Orchestrator(loaded, host, phases=[CNIPhase()])
    orchestrator.results["network"] = NetworkResult(addresses={"eth0": ["192.0.2.10/24"]})
    before = snapshot(root)
    result = orchestrator.run()
    outcome = result.outcomes[0]
    assert (outcome.outcome, outcome.reason) == ("failed", "CNIBroken")
    assert "refused (nothing was written)" in outcome.message
    expected = {
        "static address": "pod range 2001:db8:1::/64 overlaps the node's own network "
                          "2001:db8:1::/64 (spec.network.interfaces[0].addresses[0])",
        "network phase result": "overlaps the node's own network 192.0.2.0/24 "
                                "(network phase, eth0)",
        "missing plugin": "plugins[1].type: plugin 'portmap' is not an executable in "
                          "/opt/cni/bin",
    }[case]
    assert expected in outcome.message
    hint = ("install portmap into spec.cni.binDir (/opt/cni/bin) or have the agent install "
            "them with spec.cni.plugins.source: bundle or url" if case == "missing plugin"
            else "give spec.cni.conflist.values.subnet a range clear of the node's own "
                 "networks")
    assert hint in outcome.message
    after = snapshot(root)
    assert {k: v for k, v in after.items() if not k.startswith("var")} == before


def test_plan_shows_the_conflist_as_a_diff_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    plugins_in(root)
    loaded = load(tmp_path, bridge_config("198.51.100.0/24"))
    before = snapshot(root)
    (plan,) = Orchestrator(loaded, Host(root), phases=[CNIPhase()]).plan()
    assert [c.summary for c in plan.changes] == [
        "create /etc/cni/net.d/10-machine-agent.conflist"]
    added = "".join(line[1:] for line in plan.changes[0].diff.splitlines(keepends=True)
                    if line.startswith("+") and not line.startswith("+++"))
    assert json.loads(added)["plugins"][0]["ipam"]["ranges"] == [[{"subnet":
                                                                   "198.51.100.0/24"}]]
    assert snapshot(root) == before


@pytest.mark.parametrize("data_dir", ["/var/lib/cni/networks", "/var/lib/cni/networks/",
                                      "/var/lib/cni/networks/pods"])
def test_the_check_never_shares_host_locals_real_data_dir(tmp_path: Path,
                                                          data_dir: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, {"check": {"dataDir": data_dir}})
    (error,) = info.value.errors
    assert error.path == "spec.cni.check.dataDir"
    assert "host-local's own data directory (/var/lib/cni/networks)" in error.message
    assert load(tmp_path, {"check": {"dataDir": "/var/lib/cni/networks-check"}})


@pytest.mark.parametrize(("link", "address", "refused"), [
    ("eth1", "198.51.100.7/24", True),     # a DHCP lease on the node's own link
    ("eth1", "198.51.100.7/32", True),     # a host address inside the range
    ("eth1", "198.51.100.0/16", True),     # a wider network covering the range
    ("cni0", "198.51.100.1/24", False),    # the list's own bridge, from an earlier run
    ("veth1a2b", "198.51.100.1/32", False),  # a gateway ptp put on a pod's host veth
    ("eth1", "203.0.113.7/24", False),
])
def test_live_addresses_of_the_node_are_checked_but_not_the_lists_own(
        link: str, address: str, refused: bool) -> None:
    doc = render(ConflistSpec(template="bridge", values=TemplateValues(
        subnet="198.51.100.0/24")))
    found = examine(doc, "/opt/cni/bin", ALL, [], [(link, address)])
    network = str(ipaddress.ip_interface(address).network)
    assert found.problems == ([
        f"plugins[0].ipam.ranges[0][0]: pod range 198.51.100.0/24 overlaps the node's own "
        f"network {network} (address {address} on {link}); pods would shadow the node's "
        "addresses"] if refused else [])
    assert found.overlap is refused


def test_a_live_address_already_named_by_the_config_is_reported_once() -> None:
    doc = render(ConflistSpec(template="bridge", values=TemplateValues(
        subnet="198.51.100.0/24")))
    found = examine(doc, "/opt/cni/bin", ALL,
                    [("network phase, eth0", ipaddress.ip_network("198.51.100.0/24"))],
                    [("eth0", "198.51.100.9/24")])
    assert len(found.problems) == 1 and "(network phase, eth0)" in found.problems[0]


@pytest.mark.parametrize("conflist", [
    {"template": "flannel"},
    {"inline": {"cniVersion": "0.3.1", "name": "cbr0", "plugins": [
        {"type": "flannel", "delegate": {"isDefaultGateway": True}}, {"type": "portmap"}]}},
])
def test_a_flannel_list_with_the_check_on_is_refused_naming_the_switch(
        tmp_path: Path, conflist: dict[str, Any]) -> None:
    """flannel's plugin needs flanneld's subnet.env, written only after the node joined:
    the proof would fail on every node, so the config says what to set."""
    with pytest.raises(ConfigError) as info:
        load(tmp_path, {"conflist": conflist,
                        "plugins": {"source": "bundle", "path": "/srv/cni.tgz"}})
    shown = {e.path: e for e in info.value.errors}
    assert set(shown) == {"spec.cni.plugins.sha256", "spec.cni.check.enabled"}
    assert "needs /run/flannel/subnet.env" in shown["spec.cni.check.enabled"].message
    assert shown["spec.cni.check.enabled"].hint == "set spec.cni.check.enabled: false"
    loaded = load(tmp_path, {"conflist": conflist, "check": {"enabled": False}})
    assert loaded.config.spec.cni.check.enabled is False


def test_an_unreadable_node_namespace_fails_the_phase_by_name(tmp_path: Path) -> None:
    root = tmp_path / "root"
    plugins_in(root)
    loaded = load(tmp_path, bridge_config("198.51.100.0/24"))
    missing = f"ma-missing-{tmp_path.name[-6:]}"
    result = Orchestrator(loaded, Host(root, netns=missing), phases=[CNIPhase()]).run()
    outcome = result.outcomes[0]
    assert (outcome.outcome, outcome.reason) == ("failed", "CNIBroken")
    assert f"cannot read the node's addresses in namespace {missing}" in outcome.message
    assert not (root / "etc").exists()
