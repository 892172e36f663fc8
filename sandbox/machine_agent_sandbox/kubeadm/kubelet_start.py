"""kubeadm's kubelet-start phase and what the kubelet then does: the TLS bootstrap (a
credential the cluster issues), the Node it registers and keeps Ready once a CNI
configuration is there, and the health check's failure in kubeadm's words."""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from machine_agent_sandbox.kubeadm import kubelet, tls_bootstrap
from machine_agent_sandbox.kubeadm.flags import (
    kubelet_flag,
    kubelet_node_name,
)
from machine_agent_sandbox.kubeadm.node import API_TIMEOUT, CNI_CONF_DIR, KUBELET_CONF, Failed


def kubelet_unhealthy(version: str) -> None:
    """kubeadm's kubelet health check failing, in the wording of its version."""
    fail_msg = ("This error is likely caused by:\n\t- The kubelet is not running\n\t- The "
                "kubelet is unhealthy due to a misconfiguration of the node in some way "
                "(required cgroups disabled)\n")
    if int(version.lstrip("v").split(".")[1]) >= 31:
        # app/util/apiclient/wait.go WaitForKubelet; app/cmd/phases/join/kubelet.go
        print("[kubelet-check] The kubelet is not healthy after 4m0.000580205s\n\n"
              "Unfortunately, an error has occurred:\n\tThe HTTP call equal to 'curl "
              "-sSL http://127.0.0.1:10248/healthz' returned error: Get "
              "\"http://127.0.0.1:10248/healthz\": context deadline exceeded\n\n" + fail_msg)
        raise Failed("error execution phase kubelet-start: The HTTP call equal to "
                     "'curl -sSL http://127.0.0.1:10248/healthz' returned error: Get "
                     "\"http://127.0.0.1:10248/healthz\": context deadline exceeded")
    # release-1.30 and older: app/util/apiclient/wait.go WaitForHealthyKubelet, its
    # TryRunCommand giving up (apimachinery wait.ExponentialBackoff: ErrWaitTimeout);
    # kubeadmJoinFailMsg of app/cmd/phases/join/kubelet.go.
    print("[kubelet-check] Initial timeout of 40s passed.")
    for _ in range(5):
        print("[kubelet-check] It seems like the kubelet isn't running or healthy.\n"
              "[kubelet-check] The HTTP call equal to 'curl -sSL http://localhost:10248/"
              "healthz' failed with error: Get \"http://localhost:10248/healthz\": dial tcp "
              "127.0.0.1:10248: connect: connection refused.")
    print("\nUnfortunately, an error has occurred:\n\ttimed out waiting for the condition\n\n"
          + fail_msg)
    raise Failed("error execution phase kubelet-start: timed out waiting for the condition")


def api_request(server: str, ca: str, credential: str | Path, method: str, path: str,
         body: dict[str, Any] | None = None,
         content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
    """One request to the workload API stand-in; `ca` is its CA certificate (PEM);
    `credential` a bearer token, or the file of a client certificate and its key."""
    headers = {"Content-Type": content_type}
    if isinstance(credential, str):
        headers["Authorization"] = f"Bearer {credential}"
    request = urllib.request.Request(
        f"{server}{path}", method=method,
        data=json.dumps(body).encode() if body is not None else None, headers=headers)
    context = ssl.create_default_context(cadata=ca)
    if isinstance(credential, Path):
        context.load_cert_chain(credential)
    try:
        with urllib.request.urlopen(request, timeout=API_TIMEOUT, context=context) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")
    except OSError as err:
        raise Failed(f"error execution phase kubelet-start: {method} {server}{path}: "
                     f"{err}") from err


def issue(root: Path, server: str, api: dict[str, str], name: str) -> Path:
    """The kubelet's TLS bootstrap: a client certificate for system:node:<name> (group
    system:nodes) signed by the cluster (the API stand-in's CSR signer hook), stored as
    the kubelet stores it (machine_agent_sandbox.kubeadm.tls_bootstrap); its file."""
    status, doc = api_request(server, Path(api["ca"]).read_text(), api["signerToken"], "POST",
                       "/sandbox/v1/certificates",
                       {"user": f"system:node:{name}", "groups": ["system:nodes"]})
    if status != 201:
        raise Failed("error execution phase kubelet-start: error waiting for the kubelet "
                     f"to perform the TLS Bootstrap: HTTP {status}: {doc.get('message')}")
    return tls_bootstrap.store(root, str(doc["certificate"]), str(doc["key"]))


REGISTRATIONS = "kubeadm-standin.machine-agent.test/registrations"
"""The Node's annotation counting the joins that registered it: written by the same
request that registers, so a kubeadm killed right after still counts (the world file is
saved only when kubeadm ends)."""


def registrations(node: dict[str, Any] | None) -> int:
    """How many joins registered this Node (0: none, or no Node)."""
    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    return int(annotations.get(REGISTRATIONS, "0"))


def register_node(root: Path, server: str, api: dict[str, str], credential: Path,
                   name: str) -> None:
    """What the kubelet does once it runs: register its Node (with the --provider-id its
    flags carry; an existing one is taken over, pkg/kubelet/kubelet_node_status.go
    tryRegisterWithAPIServer), then post its
    status, NotReady until the runtime finds a CNI configuration."""
    ca = Path(api["ca"]).read_text()
    status, doc = api_request(server, ca, credential, "POST", "/api/v1/nodes", {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                              "kubernetes.io/os": "linux"},
                     "annotations": {REGISTRATIONS: "1"}},
        # pkg/kubelet/kubelet_node_status.go initialNode: --provider-id
        **({"spec": {"providerID": provider}}
           if (provider := kubelet_flag(root, "provider-id")) else {})})
    for _ in range(5):  # bounded: only this node's kubelet writes its Node
        if status != 409:
            break
        status, doc = api_request(server, ca, credential, "GET", f"/api/v1/nodes/{name}")
        if status == 200:  # taken over: one more join registered it (resourceVersion
            # makes the count a compare-and-swap)
            status, doc = api_request(server, ca, credential, "PATCH", f"/api/v1/nodes/{name}", {
                "metadata": {"resourceVersion": doc["metadata"]["resourceVersion"],
                             "annotations": {REGISTRATIONS: str(registrations(doc) + 1)}}},
                "application/merge-patch+json")
            status = 201 if status == 200 else status
    if status != 201:
        raise Failed(f"error execution phase kubelet-start: registering Node {name}: "
                     f"HTTP {status}: {doc.get('message')}")
    post_node_status(server, ca, credential, name, network_ready(root))


def kubelet_sync(root: Path, posted: dict[str, str]) -> None:
    """One look of the running kubelet of the node under `root`: once it has joined and a
    CNI configuration is in place, post its Node Ready (again after a new join).
    `posted` holds, per root, the kubelet.conf it was posted with. A stopped kubelet
    (kubeadm reset stops it) posts nothing."""
    try:
        conf = (root / KUBELET_CONF).read_text()
    except OSError:
        posted.pop(str(root), None)
        return
    if not kubelet.running(root):
        posted.pop(str(root), None)
        return
    if posted.get(str(root)) == conf or not network_ready(root):
        return
    try:
        if kubelet_ready(root):
            posted[str(root)] = conf
    except (Failed, OSError, LookupError, ValueError):
        pass  # not registered (yet), or the API is away: the next look tries again


def kubelet_ready(root: Path) -> bool:
    """Post Ready for the kubelet of the node under `root`; False when the node has not
    joined."""
    try:
        conf = yaml.safe_load((root / KUBELET_CONF).read_text())
    except OSError:
        return False
    name = kubelet_node_name(root)
    if name is None:
        return False
    cluster, user = conf["clusters"][0]["cluster"], conf["users"][0]["user"] or {}
    credential = tls_bootstrap.credential_file(root, user)
    if "certificate-authority-data" not in cluster or credential is None:
        return False
    post_node_status(cluster["server"],
                     base64.b64decode(cluster["certificate-authority-data"]).decode(),
                     credential, name, True)
    return True


def network_ready(root: Path) -> bool:
    """The container runtime's NetworkReady: a CNI configuration file is in place."""
    conf_dir = root / CNI_CONF_DIR
    return conf_dir.is_dir() and any(
        p.suffix in (".conf", ".conflist", ".json") for p in conf_dir.iterdir())


_NO_PRESSURE = (("MemoryPressure", "KubeletHasSufficientMemory",
                 "kubelet has sufficient memory available"),
                ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"))
"""The pressure conditions a healthy kubelet posts with Ready (nodestatus/setters.go)."""


def post_node_status(server: str, ca: str, credential: str | Path, name: str,
                     ready: bool) -> None:
    """The kubelet's Ready condition and its pressure conditions, none under pressure
    (pkg/kubelet/nodestatus/setters.go ReadyCondition, MemoryPressureCondition, ...)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status"} if ready else {
        "type": "Ready", "status": "False", "reason": "KubeletNotReady",
        "message": "container runtime network not ready: NetworkReady=false "
                   "reason:NetworkPluginNotReady message:Network plugin returns error: "
                   "cni plugin not initialized"}
    condition.update(lastHeartbeatTime=now, lastTransitionTime=now)
    conditions = [{"type": kind, "status": "False", "reason": reason, "message": message,
                   "lastHeartbeatTime": now, "lastTransitionTime": now}
                  for kind, reason, message in _NO_PRESSURE]
    status, doc = api_request(server, ca, credential, "PATCH", f"/api/v1/nodes/{name}/status",
                       {"status": {"conditions": [*conditions, condition]}},
                       "application/merge-patch+json")
    if status != 200:
        raise Failed(f"error execution phase kubelet-start: updating Node {name} status: "
                     f"HTTP {status}: {doc.get('message')}")
