"""The management cluster of the kube suite (the stand-in, or a real API server), the
node root and the sd_notify socket, for the daemon's tests."""

from tests.integration.daemon.service import systemd
from tests.integration.kube.conftest import admin, node, world

__all__ = ["admin", "node", "systemd", "world"]
