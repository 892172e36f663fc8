"""The sandbox against an external management API server in place of the stand-in: what
`MACHINE_AGENT_TEST_KUBECONFIG` (an admin kubeconfig) names — a kind cluster, a real
cluster, or a stand-in run as a server of its own.

Nothing is installed: the CRDs must be there already (each missing one is named). The
sandbox's objects live in a namespace of its own, `ma-sandbox-HASH` (labelled
`machine-agent.io/sandbox=true`, annotated with the sandbox's directory), made through
the admin credentials and deleted on the way out, also on a failure. The nodes reach
the server through a relay at the sandbox's API endpoint in the router namespace
(machine_agent_sandbox.relay); their kubeconfig names the server's own host as
`tls-server-name`, so TLS stays verified end to end. The IPAM pool controller runs here
as a client of that server (machine_agent_sandbox.pools).
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from agent.config.management import ManagementSpec
from agent.errors import AgentError, PermanentError
from agent.host import Host
from agent.kube.kubeconfig import load_credentials
from machine_agent_sandbox.cleanup import Registry
from machine_agent_sandbox.cluster import CAPI, IPAM, Admin
from machine_agent_sandbox.netns import MANAGEMENT_ADDRESS, MANAGEMENT_PORT
from machine_agent_sandbox.pools import PoolClient

REQUIRED = {
    CAPI: ("clusters", "machines", "machines/status"),
    f"{IPAM}/v1alpha2": ("inclusterippools",),
    f"{IPAM}/v1beta2": ("ipaddressclaims", "ipaddresses", "ipaddressclaims/status"),
}
"""What the sandbox uses, by group/version: the CAPI and in-cluster IPAM CRDs."""
SANDBOX_LABEL = "machine-agent.io/sandbox"
START_WAIT = 10.0
DELETE_WAIT = 60.0
"""Bound on waiting for the sandbox's namespace to be gone on the way out."""


def admin_from_kubeconfig(kubeconfig: Path, material: Path, namespace: str) -> Admin:
    """Admin access from an admin kubeconfig: token or client certificate, the CA (its
    `*-data` written under `material`), the server and its `tls-server-name`."""
    try:
        creds = load_credentials(ManagementSpec(kubeconfig=str(kubeconfig.resolve())),
                                 Host(read_only=True), material=Host(material))
    except AgentError as err:
        raise PermanentError(f"MACHINE_AGENT_TEST_KUBECONFIG: {err.message}",
                             hint="give an admin kubeconfig with a token or a client "
                                  "certificate (as `kind get kubeconfig` prints)") from err
    url = urlsplit(creds.server)
    if not url.hostname:
        raise PermanentError(f"MACHINE_AGENT_TEST_KUBECONFIG: no host in {creds.server}")
    return Admin(url.hostname, url.port or 443, None,
                 Path(creds.ca_file) if creds.ca_file else None, creds.token, creds.cert,
                 creds.tls_server_name, ns=namespace)


def missing_resources(admin: Admin) -> list[str]:
    """The resources the sandbox needs that the server does not serve, as
    `plural.group/version`."""
    missing = []
    for group_version, plurals in REQUIRED.items():
        doc = admin.call("GET", f"/apis/{group_version}", ok=(200, 404))
        served = {r.get("name") for r in doc.get("resources") or []}
        group, _, version = group_version.partition("/")
        missing += [f"{plural}.{group}/{version}" for plural in plurals
                    if plural not in served]
    return missing


def connect(registry: Registry, router: str, kubeconfig: Path) -> Admin:
    """Admin access to the external server, its CRDs checked, the sandbox's namespace
    made, the relay in the router namespace and the pool controller running; each
    undone by the registry."""
    namespace = "ma-sandbox-" + hashlib.sha256(registry.tag.encode()).hexdigest()[:10]
    admin = admin_from_kubeconfig(kubeconfig, registry.base / "external", namespace)
    missing = missing_resources(admin)
    if missing:
        raise PermanentError(
            f"the API server of MACHINE_AGENT_TEST_KUBECONFIG does not serve "
            f"{', '.join(missing)}: the sandbox installs nothing there",
            hint="install the Cluster API and in-cluster IPAM CRDs first, e.g. "
                 "kubectl apply --server-side -f sandbox/machine_agent_sandbox/crds/")
    _start_relay(registry, router, admin)
    admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {
                                            "name": admin.ns,
                                            "labels": {SANDBOX_LABEL: "true"},
                                            "annotations": {SANDBOX_LABEL: str(
                                                registry.base)}}})
    registry.on_undo(lambda: delete_namespace(admin))
    pools = PoolClient(admin).start()
    registry.on_undo(pools.stop)
    return admin


def _start_relay(registry: Registry, router: str, admin: Admin) -> None:
    target = f"[{admin.host}]" if ":" in admin.host else admin.host
    start_relay(registry, "relay", router, f"{MANAGEMENT_ADDRESS}:{MANAGEMENT_PORT}",
                f"{target}:{admin.port}", "the external API server")


def start_relay(registry: Registry, name: str, netns: str, listen: str, to: str,
                what: str) -> None:
    """A relay (machine_agent_sandbox.relay) listening at `listen` in `netns`, to `to`
    in the machine's own network; returns once it listens."""
    ready = registry.base / f"{name}.ready"
    registry.spawn([sys.executable, "-m", "machine_agent_sandbox.relay", "--netns", netns,
                    "--listen", listen, "--to", to, "--ready", str(ready)],
                   registry.base / f"{name}.log")
    deadline = time.monotonic() + START_WAIT
    while not ready.exists():
        if time.monotonic() > deadline:
            log = (registry.base / f"{name}.log").read_text()[-500:]
            raise PermanentError(f"the relay to {what} did not start: {log}")
        time.sleep(0.05)


def delete_namespace(admin: Admin) -> None:
    """Delete the sandbox's namespace (and so everything in it) and wait, bounded, until
    the server has removed it; say so on stderr when it has not."""
    path = f"/api/v1/namespaces/{admin.ns}"
    try:
        admin.call("DELETE", path, ok=(200, 202, 404))
        deadline = time.monotonic() + DELETE_WAIT
        while admin.call("GET", path, ok=(200, 404)).get("kind") == "Namespace":
            if time.monotonic() > deadline:
                raise PermanentError(f"still there after {DELETE_WAIT:g}s")
            time.sleep(0.2)
    except (PermanentError, OSError) as err:
        print(f"sandbox: namespace {admin.ns} on the external API server was not removed: "
              f"{err} (kubectl delete namespace {admin.ns})", file=sys.stderr)
