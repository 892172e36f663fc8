"""The embedded local sandbox behind `machine-agent demo` and the end-to-end tests."""
