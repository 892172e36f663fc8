"""The management cluster of the kube suite (the stand-in, or a real API server), the
node root and the sd_notify socket, for the daemon's tests. The daemon reaches the
cluster through the fault proxy (testkit/faultproxy.py), so its outage tests inject their
faults there, against either server."""

from tests.integration.daemon.service import systemd
from tests.integration.kube.conftest import admin, faulty_node, proxy, world

node = faulty_node

__all__ = ["admin", "node", "proxy", "systemd", "world"]
