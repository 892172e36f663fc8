"""In-place updates played in the sandbox as Cluster API plays them (docs/in-place-updates.md).

The node follows an AgentConfig object (a ConfigMap its Machine's annotation names, with
a Role that lets the node read just that one), and runs the agent's daemon after its
bootstrap; the update extension (`machine-agent-update-extension`) runs beside the API
server in the router's namespace; and Cluster API's UpdateMachine is called over HTTPS in
the shape its controllers send, asked again after each `retryAfterSeconds` until the
answer is final, as the Machine controller does.
"""

from __future__ import annotations

import datetime
import ipaddress
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml
from cryptography import x509

from agent.errors import PermanentError, Reason
from agent.inplace.hooks import GROUP_VERSION, path_of
from machine_agent_sandbox.cluster import CAPI, Admin, grant, node_identity
from machine_agent_sandbox.netns import NTP_ADDRESS
from machine_agent_sandbox.testkit.certs import make_ca, pem, serving_cert

if TYPE_CHECKING:
    from machine_agent_sandbox.node import Node
    from machine_agent_sandbox.sandbox import Sandbox

Obj = dict[str, Any]
EXTENSION_PORT = 9443
ANSWER_WAIT = 60.0
"""Bound on one update: the agent's trial of a change takes its syncTimeout or
kubeletRestartTimeout (5 s each in the sandbox), a rollback as long again."""
RETRY_CAP = 1.0
"""The demo asks again sooner than the `retryAfterSeconds` the extension answers (5 s)."""
UNANSWERED = "198.51.100.123"
"""An NTP server address nothing answers on (the node's default route goes nowhere)."""


@dataclass(frozen=True)
class Update:
    name: str
    story: str
    reason: Reason | None
    """The reason of the Machine's AgentConfigApplied when the agent refuses the change
    (None: the change is made)."""
    servers: tuple[str, ...] = ()
    """The KubeadmConfig's ntp.servers the MachineDeployment's new template asks for."""
    kubelet_args: tuple[tuple[str, str], ...] = ()
    """Its joinConfiguration.nodeRegistration.kubeletExtraArgs."""
    files: tuple[tuple[str, str], ...] = ()
    """Its files: (path, content), owner root."""
    file_mode: str = "0644"
    release: str = ""
    """The Machine's new spec.version (empty: as it is)."""

    def bootstrap_spec(self) -> Obj:
        spec: Obj = {}
        if self.servers:
            spec["ntp"] = {"enabled": True, "servers": list(self.servers)}
        if self.kubelet_args:
            spec["joinConfiguration"] = {"nodeRegistration": {"kubeletExtraArgs": [
                {"name": n, "value": v} for n, v in self.kubelet_args]}}
        if self.files:
            spec["files"] = [{"path": p, "content": c, "permissions": self.file_mode}
                             for p, c in self.files]
        return spec


UPDATES = {u.name: u for u in (
    Update("update-ntp-down", f"an in-place update moves the node to an NTP server that "
           f"does not answer ({UNANSWERED})", Reason.TimeNotSynchronized,
           servers=(UNANSWERED,)),
    Update("update-kubelet-flag", "an in-place update gives the kubelet a flag it does not "
           "know (--no-such-flag)", Reason.KubeletNotHealthy,
           kubelet_args=(("max-pods", "200"), ("no-such-flag", "1"))),
    Update("update-release-broken", "an in-place update moves the node to Kubernetes "
           "v1.31.4, whose kubelet in the node's versionsDir does not run (built for "
           "another architecture)", Reason.KubeletNotHealthy, release="v1.31.4"),
)}
"""The demo's in-place update faults."""
ADD_SERVER = Update("update-ntp", "an in-place update adds an NTP server", None,
                    servers=(NTP_ADDRESS, UNANSWERED))
DEMO_FILE = "/etc/machine-agent-demo.conf"
FILE_V1 = Update("update-file", "an in-place update writes a file", None,
                 files=((DEMO_FILE, "generation 1\n"),))
FILE_V1_PRIVATE = Update("update-file-mode", "an in-place update makes that file private",
                         None, files=((DEMO_FILE, "generation 1\n"),), file_mode="0600")
FILE_V2_BAD_FLAG = Update(
    "update-file-and-bad-flag", "an in-place update changes that file, adds another and "
    "gives the kubelet a flag it does not know", Reason.KubeletNotHealthy,
    files=((DEMO_FILE, "generation 2\n"), ("/etc/machine-agent-new.conf", "new\n")),
    file_mode="0600",
    kubelet_args=(("no-such-flag", "1"),))
PATCH_RELEASE = Update("update-release", "an in-place update moves the node to Kubernetes "
                       "v1.31.3", None, release="v1.31.3")
MAX_PODS = Update("update-kubelet", "an in-place update raises the kubelet's max-pods", None,
                  kubelet_args=(("max-pods", "200"),))


def config_object(node: Node) -> str:
    return f"{node.name}-agent"


def follow_config_object(box: Sandbox, node: Node) -> None:
    """Give the node an AgentConfig object: the ConfigMap (the sandbox's time settings,
    as the cluster's operator would keep them there), the Machine's annotation naming it,
    and the node's RBAC rendered again with it (node-rbac.yaml's rule for that one
    object)."""
    ns, name = box.admin.ns, config_object(node)
    text = yaml.safe_dump({"apiVersion": "machine-agent.io/v1alpha1", "kind": "AgentConfig",
                           "spec": {"time": {"servers": [{"host": NTP_ADDRESS,
                                                          "minpoll": -2, "maxpoll": 0}]}}},
                          sort_keys=False)
    box.admin.create(f"/api/v1/namespaces/{ns}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
        "data": {"config.yaml": text}})
    machine = box.admin.call(
        "PATCH", f"/apis/{CAPI}/namespaces/{ns}/machines/{node.name}", {
            "metadata": {"annotations": {"machine-agent.io/config": f"configmap/{name}"}}},
        content_type="application/merge-patch+json")
    grant(box.admin, node_identity(box.admin, node.name, machine["metadata"]["uid"],
                                   node.claims, config=name))


def start_daemon(box: Sandbox, node: Node) -> Any:
    """`machine-agent daemon` on the node (the systemd service), its log in the sandbox."""
    return box.registry.spawn(node.agent("daemon"), box.registry.base / f"{node.name}-daemon.log",
                              env=node.env())


def start_extension(box: Sandbox) -> Admin:
    """The update extension on 127.0.0.1:EXTENSION_PORT in the router's namespace, with
    the sandbox's admin kubeconfig and a serving certificate of its own CA; a client for
    it (the Runtime SDK's caller), once it answers discovery."""
    base = box.registry.base / "update-extension"
    base.mkdir()
    ca = make_ca("update-extension-ca")
    now = datetime.datetime.now(datetime.UTC)
    cert, key = serving_cert(ca, base, names=[x509.IPAddress(ipaddress.ip_address(
        "127.0.0.1"))], not_before=now - datetime.timedelta(hours=1),
        not_after=now + datetime.timedelta(days=1))
    (base / "ca.crt").write_bytes(pem(ca.cert))
    box.registry.spawn(["ip", "netns", "exec", box.network.router, sys.executable, "-m",
                        "agent.inplace.server", "--kubeconfig",
                        str(box.registry.base / "apiserver/admin.kubeconfig"),
                        "--cert", str(cert), "--key", str(key), "--port",
                        str(EXTENSION_PORT)], box.registry.base / "update-extension.log")
    caller = Admin("127.0.0.1", EXTENSION_PORT, box.network.router, base / "ca.crt")
    deadline = time.monotonic() + 20
    while True:
        try:
            caller.call("POST", f"/{GROUP_VERSION}/discovery", {
                "apiVersion": GROUP_VERSION, "kind": "DiscoveryRequest"})
            return caller
        except OSError:
            if time.monotonic() > deadline:
                raise PermanentError("the update extension did not start: "
                                     + (box.registry.base / "update-extension.log")
                                     .read_text()[-800:]) from None
            time.sleep(0.1)


def update_request(box: Sandbox, node: Node, update: Update) -> Obj:
    """UpdateMachineRequest as Cluster API's Machine controller sends it: the desired
    Machine, infrastructure machine and KubeadmConfig (with the update's changes)."""
    machine = box.admin.machine(node.name)
    if update.release:
        machine["spec"]["version"] = update.release
    return {"apiVersion": GROUP_VERSION, "kind": "UpdateMachineRequest", "settings": {},
            "desired": {
                "machine": machine,
                "infrastructureMachine": {
                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                    "kind": "Metal3Machine",
                    "metadata": {"name": node.name, "namespace": box.admin.ns}},
                "bootstrapConfig": {
                    "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
                    "kind": "KubeadmConfig",
                    "metadata": {"name": node.name, "namespace": box.admin.ns},
                    "spec": update.bootstrap_spec()}}}


def play_update(caller: Admin, request: Obj, on_answer: Callable[[Obj], None]) -> Obj:
    """UpdateMachine, asked again while the answer is "in progress" (bounded): the final
    answer."""
    deadline = time.monotonic() + ANSWER_WAIT
    while True:
        answer: Obj = caller.call("POST", path_of("UpdateMachine"), request)
        on_answer(answer)
        retry = int(answer.get("retryAfterSeconds") or 0)
        if answer.get("status") != "Success" or retry == 0:
            return answer
        if time.monotonic() > deadline:
            raise PermanentError(f"UpdateMachine still in progress after {ANSWER_WAIT:g}s: "
                                 f"{answer.get('message')}")
        time.sleep(min(retry, RETRY_CAP))


def wait_bootstrapped(box: Sandbox, node: Node, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while (box.conditions(node).get("NodeBootstrapped") or {}).get("status") != "True":
        if time.monotonic() > deadline:
            raise PermanentError(f"the daemon on {node.name} did not bootstrap within "
                                 f"{timeout:g}s")
        time.sleep(0.2)
