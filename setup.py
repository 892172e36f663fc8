"""The agent's packages, found rather than listed (a new phase's package needs no entry):
every package under agent/, and the top-level templates/ as agent.templates (its
package-dir and package data are in pyproject.toml)."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["agent", "agent.*"]), "agent.templates"])
