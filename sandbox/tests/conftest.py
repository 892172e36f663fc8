"""The guards every test of the repository runs under (tests/conftest.py): no stray
process, no write outside the test's temporary tree, no silent skip."""

from tests.conftest import (  # noqa: F401 (fixtures and hooks, found by their names)
    own_redactions,
    pytest_configure,
    pytest_runtest_makereport,
    side_effect_guard,
    stray_process_guard,
)
