"""The management cluster fixtures of the kube suite (stand-in or real API server, the
admin, a joinable node root), for first-boot tests that reach it."""

from tests.integration.kube.conftest import admin, proxy, world

__all__ = ["admin", "proxy", "world"]
