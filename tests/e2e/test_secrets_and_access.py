"""Secrets and access, on a real sandbox bootstrap: the secrets a run is given never show
in anything it outputs, the files holding them are private, and a node's credentials
reach only its own Machine, bootstrap Secret and IPAddressClaims."""

from __future__ import annotations

import dataclasses
import json
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from machine_agent_sandbox.cluster import CAPI, IPAM, TOKEN, Admin
from machine_agent_sandbox.kubeadm.tls_bootstrap import credential_file
from machine_agent_sandbox.sandbox import Sandbox

from agent.daemon.deletion import HOOK
from tests.e2e.conftest import assert_bootstrapped

pytestmark = pytest.mark.allow_processes
JOIN_CONFIG = "run/kubeadm/kubeadm-join-config.yaml"
KUBELET_CONF = "etc/kubernetes/kubelet.conf"


def node_token(root: Path) -> str:
    doc = yaml.safe_load((root / "etc/machine-agent/management.kubeconfig").read_text())
    return str(doc["users"][0]["user"]["token"])


def kubelet_credential(root: Path) -> str:
    """The secret of the credential the workload cluster issued the kubelet at the join:
    its client certificate's private key (the first line of its PEM block, in any copy
    of the key)."""
    doc = yaml.safe_load((root / KUBELET_CONF).read_text())
    pem = credential_file(root, doc["users"][0]["user"])
    assert pem is not None, "kubelet.conf names no client certificate"
    key = pem.read_text().split("-----BEGIN PRIVATE KEY-----\n", 1)[1]
    return key.splitlines()[0]


def as_node(box: Sandbox, token: str) -> Admin:
    return dataclasses.replace(box.admin, token=token, cert=None)


def status_code(client: Admin, method: str, path: str, body: object = None) -> int:
    """The HTTP status of one request (the body is not needed here)."""
    try:
        client.call(method, path, body, ok=(200, 201),
                    content_type="application/merge-patch+json")
    except Exception as err:  # Admin.call raises on any other status, naming it
        return int(str(err).split(": ", 1)[1].split()[0])
    return 200


def test_a_node_credential_reaches_only_its_own_machine_and_secret(
        bring_up: Callable[[int], Sandbox]) -> None:
    box = bring_up(2)
    a, b = box.nodes
    client = as_node(box, node_token(a.root))
    machines = f"/apis/{CAPI}/namespaces/{box.admin.ns}/machines"
    secrets = f"/api/v1/namespaces/{box.admin.ns}/secrets"
    # Its own Machine may be patched (RBAC cannot narrow that to the pre-terminate hook
    # annotation; docs/security.md names the admission policy that does).
    own = {"GET machine": status_code(client, "GET", f"{machines}/{a.name}"),
           "GET secret": status_code(client, "GET", f"{secrets}/{a.name}-bootstrap"),
           "PATCH own hook": status_code(client, "PATCH", f"{machines}/{a.name}", {
               "metadata": {"annotations": {HOOK: None}}})}
    assert own == {"GET machine": 200, "GET secret": 200, "PATCH own hook": 200}
    other = {
        "GET machine": status_code(client, "GET", f"{machines}/{b.name}"),
        "PATCH machine status": status_code(client, "PATCH", f"{machines}/{b.name}/status",
                                            {"status": {}}),
        "GET secret": status_code(client, "GET", f"{secrets}/{b.name}-bootstrap"),
        "LIST secrets": status_code(client, "GET", secrets),
        "DELETE own machine": status_code(client, "DELETE", f"{machines}/{a.name}"),
        "PATCH other machine": status_code(client, "PATCH", f"{machines}/{b.name}", {
            "metadata": {"annotations": {HOOK: None}}}),
    }
    assert other == dict.fromkeys(other, 403)


def test_a_node_credential_cannot_free_another_nodes_address(
        bring_up: Callable[[int], Sandbox]) -> None:
    """Deleting a node's IPAddressClaim hands its address out again: the Role names each
    node's own claims, so a stolen credential cannot, while the node itself claims,
    watches and keeps its address."""
    box = bring_up(2)
    assert box.features.ipam, "the sandbox's nodes claim their address with the capi plugin"
    a, b = box.nodes
    for node in (a, b):
        code, lines = node.run("run")
        assert code == 0, "\n".join(lines)
    assert_bootstrapped(box, a)
    owner = {c["metadata"]["ownerReferences"][0]["name"]: c["metadata"]["name"]
             for c in box.admin.claims()}
    client = as_node(box, node_token(a.root))
    claims = f"/apis/{IPAM}/v1beta2/namespaces/{box.admin.ns}/ipaddressclaims"
    assert status_code(client, "GET", f"{claims}/{owner[a.name]}") == 200
    other = {"LIST claims": status_code(client, "GET", claims),
             "GET other's claim": status_code(client, "GET", f"{claims}/{owner[b.name]}"),
             "DELETE other's claim": status_code(client, "DELETE",
                                                 f"{claims}/{owner[b.name]}")}
    assert other == dict.fromkeys(other, 403)
    assert {c["metadata"]["name"] for c in box.admin.claims()} == set(owner.values())


def outputs(box: Sandbox, run_lines: list[str]) -> dict[str, str]:
    """Everything a run of the node shows anyone: its log, its local files of record,
    the Machine and Events in the management cluster, and the read-only commands."""
    (node,) = box.nodes
    state = node.root / "var/lib/machine-agent"
    found = {"run log": "\n".join(run_lines),
             "journal": (state / "journal.json").read_text(),
             "status file": (state / "status.json").read_text(),
             "Machine": json.dumps(box.admin.machine(node.name)),
             "Events": json.dumps(box.admin.call(
                 "GET", f"/apis/events.k8s.io/v1/namespaces/{box.admin.ns}/events"))}
    for args in (("plan",), ("doctor",), ("config", "show"), ("config", "show", "--origin"),
                 ("status",), ("status", "--json")):
        done = subprocess.run(node.agent("--log-level", "debug", *args), capture_output=True,
                              text=True, timeout=60, env=node.env())
        found[" ".join(args)] = done.stdout + done.stderr
    return found


def test_no_secret_the_run_was_given_shows_in_any_output(
        bring_up: Callable[[int], Sandbox]) -> None:
    box = bring_up(1)
    (node,) = box.nodes
    code, lines = node.run("--log-level", "debug", "run")
    assert code == 0, "\n".join(lines)
    assert_bootstrapped(box, node)
    secrets = {"management token": node_token(node.root),
               "bootstrap token secret": TOKEN.split(".")[1],
               "kubelet credential": kubelet_credential(node.root)}
    leaks = {(where, which) for where, text in outputs(box, lines).items()
             for which, secret in secrets.items() if secret in text}
    assert leaks == set()


NETBOX_TOKEN = "nbt_machineagent." + "NetBoxTokenSecret0" * 2 + "1234"


def test_a_netbox_token_never_shows_in_plan_doctor_status_or_config_show(
        tmp_path: Path) -> None:
    """The NetBox plugin's token, read from its file by every command that loads the
    plugin (doctor checks it loads), is in none of their output at debug level."""
    etc = tmp_path / "etc/machine-agent"
    etc.mkdir(parents=True)
    (tmp_path / "etc/machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    (etc / "netbox.token").write_text(NETBOX_TOKEN + "\n")
    (etc / "netbox.token").chmod(0o600)
    (etc / "config.yaml").write_text("""apiVersion: machine-agent.io/v1alpha1
kind: AgentConfig
spec:
  network:
    interfaces:
      - name: eth0
        addresses:
          - ipam: {plugin: netbox, pool: 192.0.2.0/24, family: ipv4}
  ipam:
    plugins:
      netbox: {url: "http://127.0.0.1:9", tokenFile: /etc/machine-agent/netbox.token}
  join:
    kubernetesVersion: v1.31.2
""")
    shown = {}
    for args in (("plan",), ("doctor",), ("config", "show"), ("config", "show", "--origin"),
                 ("status",), ("status", "--json")):
        done = subprocess.run([sys.executable, "-m", "agent.cli", "--root", str(tmp_path),
                               "--log-level", "debug", *args],
                              capture_output=True, text=True, timeout=60)
        shown[" ".join(args)] = done.stdout + done.stderr
    assert "plugin netbox loads" in shown["doctor"]  # the token was read
    assert "tokenFile" in shown["config show"]
    secret = NETBOX_TOKEN.split(".")[1]
    assert [where for where, text in shown.items() if secret in text] == []


def test_files_holding_secrets_are_private_and_the_state_directory_is_0700(
        bring_up: Callable[[int], Sandbox]) -> None:
    box = bring_up(1)
    (node,) = box.nodes
    code, lines = node.run("run")
    assert code == 0, "\n".join(lines)
    secrets = (node_token(node.root), TOKEN.split(".")[1], kubelet_credential(node.root))
    holding = {}
    for path in node.root.rglob("*"):
        if path.is_file() and not path.is_symlink() and any(
                s.encode() in path.read_bytes() for s in secrets):
            holding[str(path.relative_to(node.root))] = oct(stat.S_IMODE(path.stat().st_mode))
    # The join configuration is written as the bootstrap data asks: CABPK's 0640
    # root:root (cluster-api bootstrap/kubeadm/internal/cloudinit/node.go); group root
    # only, never others. Every other file with a secret is 0600, kubelet.conf as kubeadm
    # writes it (client-go clientcmd.WriteToFile), the kubelet's certificate and key as
    # its file store does.
    assert holding.pop(JOIN_CONFIG) == "0o640"
    issued = [p for p in holding if p.startswith("var/lib/kubelet/pki/kubelet-client-")]
    assert len(issued) == 1 and holding.pop(issued[0]) == "0o600"
    assert holding == {"etc/machine-agent/management.kubeconfig": "0o600"}
    state = node.root / "var/lib/machine-agent"
    assert oct(stat.S_IMODE(state.stat().st_mode)) == "0o700"
