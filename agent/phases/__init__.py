"""The phases, each in its own package (agent/phases/<name>/), listed once in
agent/phases/registry.py. Importing this package imports no phase."""
