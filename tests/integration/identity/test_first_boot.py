"""First boot of a golden image that knows nothing about the node: its identity and the
management cluster's credentials come only from a NoCloud seed, or only from the kernel
command line and the file it names. Either way the agent finds its Machine (with exactly
the shipped node RBAC), stores the credentials 0600, never logs them, and joins — shown
by the Machine's status and by `config show --origin`."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml
from machine_agent_sandbox.testkit.faultproxy import FaultProxy
from machine_agent_sandbox.testkit.management import revoke_service_account

from agent.cli import main
from agent.errors import Reason
from agent.host import Host
from agent.kube.errors import Unauthorized
from agent.session import open_session
from tests.integration.identity.nocloud import agent_user_data, nocloud_root
from tests.integration.kube.conftest import (
    HOST_UUID,
    MACHINE,
    Admin,
    World,
    node_token,
    seed,
)
from tests.integration.kube.test_machine_reporting import assert_bootstrapped

CREDENTIALS = "var/lib/machine-agent/credentials"
META = "instance-id: iid-worker-0\nlocal-hostname: worker-0\n"
PART = "cloud-init user-data (part machine-agent.yaml)"
BOOT_FILE = "/run/machine-agent/boot.yaml"
NODE_ACCOUNT = f"machine-agent-{MACHINE}"
"""The ServiceAccount node_token binds the shipped RBAC to."""
CMDLINE = "BOOT_IMAGE=/vmlinuz-6.1.0-18-amd64 root=/dev/nfs ip=dhcp ro console=ttyS0"


def ca_pem(admin: Admin) -> str:
    return Path(admin.verify).read_text() if isinstance(admin.verify, str) else ""


def kubeconfig(admin: Admin, token: str, via: FaultProxy | None = None) -> str:
    """The node's kubeconfig: the server, or the fault proxy in front of it (`via`)."""
    cluster: dict[str, str] = {"server": via.url if via is not None else admin.server}
    ca = via.ca_path.read_text() if via is not None else ca_pem(admin)
    if ca:
        cluster["certificate-authority-data"] = base64.b64encode(ca.encode()).decode()
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "node",
        "clusters": [{"name": "mgmt", "cluster": cluster}],
        "users": [{"name": "node", "user": {"token": token}}],
        "contexts": [{"name": "node", "context": {"cluster": "mgmt", "user": "node"}}]})


def config_show(root: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["--root", str(root), "config", "show", "--origin"]) == 0
    return capsys.readouterr().out


def assert_private(path: Path) -> None:
    assert path.stat().st_mode & 0o777 == 0o600, oct(path.stat().st_mode)
    assert path.parent.stat().st_mode & 0o777 == 0o700, oct(path.parent.stat().st_mode)


def test_a_node_with_only_a_nocloud_seed_finds_its_machine_and_credentials(
        world: World, admin: Admin,
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    seed(admin, world, labels={"machine-agent.io/host-uuid": HOST_UUID})
    token = node_token(admin, discovery=True)
    agent = yaml.safe_dump({
        "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
        "spec": {"identity": {"discovery": {"namespace": admin.ns}},
                 "management": {"kubeconfigData": kubeconfig(admin, token)}}})
    root = nocloud_root(world.root, META, agent_user_data(agent))
    (root / "sys/class/dmi/id").mkdir(parents=True)
    (root / "sys/class/dmi/id/product_uuid").write_text(HOST_UUID.upper() + "\n")
    assert not (root / "etc/machine-agent").exists()

    assert main(["--root", str(root), "run"]) == 0
    assert_bootstrapped(admin)
    stored = root / CREDENTIALS / "kubeconfig"
    assert yaml.safe_load(stored.read_text())["users"][0]["user"]["token"] == token
    assert_private(stored)
    shown = config_show(root, capsys)
    assert f'spec.identity.discovery.namespace = "{admin.ns}"  # {PART}' in shown
    assert f'spec.management.kubeconfigData = "***"  # {PART}' in shown
    assert token not in shown + caplog.text + capsys.readouterr().err


def test_a_node_with_only_a_kernel_command_line_and_a_config_file_finds_its_machine(
        world: World, admin: Admin,
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    seed(admin, world)
    token = node_token(admin)
    management = {"server": admin.server, "tokenData": token}
    if ca_pem(admin):
        management["caData"] = ca_pem(admin)
    root = world.root
    (root / "run/machine-agent").mkdir(parents=True)
    (root / BOOT_FILE.lstrip("/")).write_text(yaml.safe_dump({
        "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
        "spec": {"management": management}}))
    (root / "proc/cmdline").write_text(
        f"{CMDLINE} machine-agent.machine={admin.ns}/{MACHINE} "
        f"machine-agent.config={BOOT_FILE}\n")

    assert main(["--root", str(root), "run"]) == 0
    assert_bootstrapped(admin)
    assert (root / CREDENTIALS / "token").read_text() == token + "\n"
    assert_private(root / CREDENTIALS / "token")
    shown = config_show(root, capsys)
    assert f'spec.identity.machine.name = "{MACHINE}"  # kernel command line ' \
           "machine-agent.machine" in shown
    assert f'spec.management.server = "{admin.server}"  # kernel command line ' \
           f"machine-agent.config={BOOT_FILE}" in shown
    assert 'spec.management.tokenData = "***"' in shown
    assert token not in shown + caplog.text + capsys.readouterr().err


def test_an_expired_credential_is_reported_once_and_not_retried(
        world: World, admin: Admin, proxy: FaultProxy,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The node's ServiceAccount deleted (its bound token now answers 401, as an expired
    one does): one request, refused, is the whole run; counted by the proxy the node
    reaches the server through."""
    seed(admin, world)
    token = node_token(admin)
    root = world.root
    (root / "proc/cmdline").write_text(f"machine-agent.machine={admin.ns}/{MACHINE} "
                                       f"machine-agent.config={BOOT_FILE}\n")
    (root / "run/machine-agent").mkdir(parents=True)
    (root / BOOT_FILE.lstrip("/")).write_text(yaml.safe_dump({
        "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
        "spec": {"management": {"kubeconfigData": kubeconfig(admin, token, proxy)},
                 "retry": {"attempts": 5, "initialDelay": "10ms"}}}))
    revoke_service_account(admin, NODE_ACCOUNT, token)
    proxy.reset_counters()

    with pytest.raises(Unauthorized) as err:
        open_session(Host(root))
    assert err.value.reason == Reason.ManagementUnauthorized
    assert sum(proxy.counters().values()) == 1

    proxy.reset_counters()
    assert main(["--root", str(root), "run"]) == 1
    assert sum(proxy.counters().values()) == 1
    message = capsys.readouterr().err
    assert f"GET /apis/cluster.x-k8s.io/v1beta2/namespaces/{admin.ns}/machines/{MACHINE}: " \
           "401 Unauthorized" in message
    assert "expired" in message and "not retried" in message


def test_a_credential_that_expires_mid_run_is_refused_once_not_per_report(
        world: World, admin: Admin, proxy: FaultProxy,
        caplog: pytest.LogCaptureFixture) -> None:
    seed(admin, world)
    token = node_token(admin)
    root = world.root
    (root / "proc/cmdline").write_text(f"machine-agent.machine={admin.ns}/{MACHINE} "
                                       f"machine-agent.config={BOOT_FILE}\n")
    (root / "run/machine-agent").mkdir(parents=True)
    (root / BOOT_FILE.lstrip("/")).write_text(yaml.safe_dump({
        "apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
        "spec": {"management": {"kubeconfigData": kubeconfig(admin, token, proxy)}}}))
    host = Host(root)
    session = open_session(host)
    revoke_service_account(admin, NODE_ACCOUNT, token)
    proxy.reset_counters()

    result = session.orchestrator(host).run()
    assert result.ok  # the node itself is fine: it joins; only the reports are refused
    assert sum(proxy.counters().values()) == 1
    # Matched by the reporter's words, not by "401": a random port such as 40169 in any
    # other message would count as a second refusal.
    refusals = [r.getMessage() for r in caplog.records
                if "refused the report" in r.getMessage()]
    assert len(refusals) == 1
    assert "401 Unauthorized" in refusals[0] and "kept in the journal for the next" in refusals[0]
