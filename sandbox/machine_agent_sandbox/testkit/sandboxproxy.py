"""The tests' fault proxy (testkit/faultproxy.py) between a sandbox node and the sandbox's
management API, whichever it is: the stand-in or an external server
(MACHINE_AGENT_TEST_KUBECONFIG). What the node sends is then counted, and can be
faulted, the same way against both; no stand-in hook is used.

The proxy runs in the test's process, on the machine's loopback. Its upstream is the
external server as the admin kubeconfig names it, or the stand-in, which listens only in
the router namespace, put at a loopback port by a relay (`--to-netns`). A second relay
puts the proxy at PROXY_PORT of the sandbox's API address in the router namespace, where
the node reaches it; the node's kubeconfig names it there, with the proxy's CA and the
name its certificate holds (`tls-server-name: localhost`). On the way out the node's
kubeconfig is restored and both relays stop.
"""

from __future__ import annotations

import base64
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from agent.errors import PermanentError
from machine_agent_sandbox.cleanup import Registry
from machine_agent_sandbox.netns import MANAGEMENT_ADDRESS, MANAGEMENT_PORT
from machine_agent_sandbox.node import Node
from machine_agent_sandbox.sandbox import Sandbox
from machine_agent_sandbox.testkit.faultproxy import FaultProxy

PROXY_PORT = 6444
"""Where the node reaches the proxy, on the sandbox's API address (the API is at 6443)."""
KUBECONFIG = "/etc/machine-agent/management.kubeconfig"
START_WAIT = 10.0


def _relay(registry: Registry, name: str, args: list[str]
           ) -> tuple[subprocess.Popen[bytes], str]:
    """Start a relay (recorded for the sandbox's undo); its process and the HOST:PORT it
    listens on."""
    ready = registry.base / f"{name}.ready"
    proc = registry.spawn([sys.executable, "-m", "machine_agent_sandbox.relay", *args,
                           "--ready", str(ready)], registry.base / f"{name}.log")
    deadline = time.monotonic() + START_WAIT
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            log = (registry.base / f"{name}.log").read_text()[-500:]
            raise PermanentError(f"the relay {name} did not start: {log}")
        time.sleep(0.05)
    return proc, ready.read_text().strip()


@contextlib.contextmanager
def through_proxy(box: Sandbox, node: Node) -> Iterator[FaultProxy]:
    """`node` reaches the management API only through a fault proxy while inside."""
    admin, registry = box.admin, box.registry
    started: list[subprocess.Popen[bytes]] = []
    try:
        if admin.external:
            host = f"[{admin.host}]" if ":" in admin.host else admin.host
            upstream = f"https://{host}:{admin.port}"
        else:
            relay, listening = _relay(registry, "standin-relay", [
                "--listen", "127.0.0.1:0", "--to-netns", box.network.router,
                "--to", f"{MANAGEMENT_ADDRESS}:{MANAGEMENT_PORT}"])
            started.append(relay)
            upstream = f"https://{listening}"
        proxy = FaultProxy(upstream, str(admin.ca) if admin.ca else True,
                           registry.base / "fault-proxy", admin.cert).start()
        try:
            relay, _ = _relay(registry, "proxy-relay", [
                "--netns", box.network.router, "--listen", f"{MANAGEMENT_ADDRESS}:{PROXY_PORT}",
                "--to", proxy.url.removeprefix("https://")])
            started.append(relay)
            with _pointed_at(node, proxy):
                yield proxy
        finally:
            proxy.stop()
    finally:
        for relay in started:
            registry.stop(relay)


@contextlib.contextmanager
def _pointed_at(node: Node, proxy: FaultProxy) -> Iterator[None]:
    path = node.root / KUBECONFIG.lstrip("/")
    original = path.read_text()
    config = yaml.safe_load(original)
    cluster = config["clusters"][0]["cluster"]
    cluster["server"] = f"https://{MANAGEMENT_ADDRESS}:{PROXY_PORT}"
    cluster["certificate-authority-data"] = base64.b64encode(
        Path(proxy.ca_path).read_bytes()).decode()
    cluster["tls-server-name"] = "localhost"  # what the proxy's certificate holds
    node.write(KUBECONFIG, yaml.safe_dump(config), mode=0o600)
    try:
        yield
    finally:
        node.write(KUBECONFIG, original, mode=0o600)
