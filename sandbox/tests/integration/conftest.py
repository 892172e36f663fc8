"""The API stand-in every integration suite runs against, or nothing when
MACHINE_AGENT_TEST_KUBECONFIG points the suites at a real API server
(tests/integration/conftest.py)."""

from tests.integration.conftest import standin  # noqa: F401 (a fixture, found by its name)
