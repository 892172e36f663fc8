"""`machine-agent run --only cni` end to end, inside a throwaway "node" namespace: plugins
installed from a local tarball with its checksum, the conflist written and proved with
the real plugins' ADD/CHECK/DEL; a re-run changes nothing; hostile inputs fail clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.cni_fixtures import (
    check_namespaces,
    host_links,
    ip,
    netns_names,
    node_namespace,
    plugin_bundle,
    sha256,
    snapshot,
    tarball,
    unique,
)

REPO = Path(__file__).parents[3]
STATE = ("var/lib/machine-agent/journal.json", "var/lib/machine-agent/status.json",
         "var/lib/machine-agent/node.lock", "var", "var/lib", "var/lib/machine-agent")
"""The agent's own journal, status and node lock (and their directories), not the node's
state."""


def write_config(path: Path, bundle_sha: str, bridge: str, subnet: str = "198.51.100.0/24",
                 *, static: bool = True) -> Path:
    network = {"interfaces": [{"name": "eth0", "addresses": [{"static": "192.0.2.10/24"}]}]}
    doc = {
        "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
        "spec": {
            **({"network": network} if static else {}),
            "cni": {
                "plugins": {"source": "bundle", "path": "/srv/cni-plugins.tgz",
                            "sha256": bundle_sha},
                "conflist": {"template": "bridge",
                             "values": {"name": "podnet", "bridge": bridge,
                                        "subnet": subnet}},
            },
        },
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def agent(node: str, root: Path, config: Path) -> subprocess.CompletedProcess[str]:
    """The agent as a node would run it, in the node's namespace (so the bridge plugin
    creates its bridge there, never in the test machine's own namespace)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        ["ip", "netns", "exec", node, sys.executable, "-m", "agent.cli", "--root", str(root),
         "run", "--only", "cni", "-c", str(config)],
        env=env, capture_output=True, text=True, timeout=120, check=False)


def without_state(tree: dict[str, tuple[bytes, int]]) -> dict[str, tuple[bytes, int]]:
    return {k: v for k, v in tree.items() if k not in STATE}


@pytest.mark.allow_processes
def test_run_installs_writes_and_proves_then_rerun_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "srv").mkdir(parents=True)
    bundle = plugin_bundle()
    (root / "srv/cni-plugins.tgz").write_bytes(bundle)
    bridge = unique("mabr")
    config = write_config(tmp_path / "cni.yaml", sha256(bundle), bridge)
    namespaces = check_namespaces()
    with node_namespace() as node:
        first = agent(node, root, config)
        assert first.returncode == 0, first.stdout + first.stderr
        assert "cni      applied 2 change(s)" in first.stdout
        assert "proved with ADD/CHECK/DEL (pod got 198.51.100." in first.stdout
        installed = sorted(p.name for p in (root / "opt/cni/bin").iterdir())
        assert installed == ["bridge", "host-local", "loopback", "portmap"]
        conflist = json.loads((root / "etc/cni/net.d/10-machine-agent.conflist").read_text())
        assert conflist["name"] == "podnet"
        assert [p["type"] for p in conflist["plugins"]] == ["bridge", "portmap", "loopback"]
        assert conflist["plugins"][0]["ipam"]["ranges"] == [[{"subnet": "198.51.100.0/24"}]]
        # the bridge is in the node's namespace; the pod namespace and the check's
        # host-local data are gone
        assert bridge in ip("-n", node, "-o", "link", "show").stdout
        assert bridge not in host_links()
        assert not (root / "var/lib/machine-agent/cni-check").exists() or not any(
            (root / "var/lib/machine-agent/cni-check").iterdir())
        shown = subprocess.run(
            [sys.executable, "-m", "agent.cli", "--root", str(root), "status", "--json"],
            env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
            check=False, timeout=60)
        assert shown.returncode == 1  # only cni ran: the node is not bootstrapped
        status = json.loads(shown.stdout)
        cni = next(c for c in status["conditions"] if c["type"] == "CNIReady")
        assert (cni["status"], cni["reason"]) == ("True", "CNIInstalled")
        assert status["phases"]["cni"]["result"]["check"]["commands"] == ["ADD", "CHECK", "DEL"]

        before = without_state(snapshot(root))
        again = agent(node, root, config)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "cni      up to date, nothing to apply" in again.stdout
        assert without_state(snapshot(root)) == before

        # changed by hand (a plugin gone; the list emptied): a re-run puts it back
        for drift in ("opt/cni/bin/portmap", "etc/cni/net.d/10-machine-agent.conflist"):
            if drift.endswith("portmap"):
                (root / drift).unlink()
            else:
                (root / drift).write_text("{}")
            repaired = agent(node, root, config)
            assert repaired.returncode == 0, repaired.stdout + repaired.stderr
            assert "cni      applied 1 change(s)" in repaired.stdout, drift
            assert without_state(snapshot(root)) == before
    pod = status["phases"]["cni"]["result"]["check"]["namespace"]
    assert pod not in netns_names() and check_namespaces() == namespaces
    assert bridge not in host_links()


@pytest.mark.allow_processes
@pytest.mark.parametrize("case", ["checksum", "traversal", "overlap"])
def test_hostile_input_fails_clean_and_changes_nothing(tmp_path: Path, case: str) -> None:
    root = tmp_path / "root"
    (root / "srv").mkdir(parents=True)
    bundle = plugin_bundle(("bridge", "host-local", "portmap", "loopback"))
    digest, subnet = sha256(bundle), "198.51.100.0/24"
    if case == "checksum":
        digest = sha256(b"something else")
    elif case == "traversal":
        bundle = tarball([("bridge", b"x"), ("../../etc/cron.d/evil", b"* * * * * root x\n")])
        digest = sha256(bundle)
    else:  # the pod range covers the node's own 192.0.2.10/24
        subnet = "192.0.2.0/25"
    (root / "srv/cni-plugins.tgz").write_bytes(bundle)
    config = write_config(tmp_path / "cni.yaml", digest, unique("mabr"), subnet)
    before = snapshot(root)
    with node_namespace() as node:
        run = agent(node, root, config)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "cni      FAILED CNIBroken" in run.stdout
    expected = {
        "checksum": "nothing was installed",
        "traversal": "'../../etc/cron.d/evil': path with '..' escapes the target",
        "overlap": "pod range 192.0.2.0/25 overlaps the node's own network 192.0.2.0/24 "
                   "(spec.network.interfaces[0].addresses[0])",
    }[case]
    assert expected in run.stdout
    assert without_state(snapshot(root)) == before
    assert not (tmp_path / "etc").exists()


@pytest.mark.allow_processes
def test_a_pod_range_over_an_address_the_node_has_live_is_refused(tmp_path: Path) -> None:
    """A DHCP lease or the image's own configuration is not in spec.network and no
    network phase ran: the node's live addresses count all the same."""
    root = tmp_path / "root"
    (root / "srv").mkdir(parents=True)
    bundle = plugin_bundle()
    (root / "srv/cni-plugins.tgz").write_bytes(bundle)
    bridge = unique("mabr")
    config = write_config(tmp_path / "cni.yaml", sha256(bundle), bridge, "192.0.2.0/24",
                          static=False)
    before = snapshot(root)
    with node_namespace() as node:
        ip("-n", node, "link", "add", "uplink0", "type", "veth", "peer", "name", "uplink0p")
        ip("-n", node, "addr", "add", "192.0.2.5/24", "dev", "uplink0")
        ip("-n", node, "link", "set", "uplink0", "up")
        run = agent(node, root, config)
        links = ip("-n", node, "-o", "link", "show").stdout
        routes = ip("-n", node, "route", "show", "192.0.2.0/24").stdout.splitlines()
    assert run.returncode == 1, run.stdout + run.stderr
    assert "cni      FAILED CNIBroken" in run.stdout
    assert ("pod range 192.0.2.0/24 overlaps the node's own network 192.0.2.0/24 "
            "(address 192.0.2.5/24 on uplink0)") in run.stdout
    assert "give spec.cni.conflist.values.subnet a range clear of" in run.stdout
    assert without_state(snapshot(root)) == before
    assert bridge not in links and len(routes) == 1
