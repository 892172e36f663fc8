"""The embedded local environment behind `machine-agent demo` and the integration tests."""
