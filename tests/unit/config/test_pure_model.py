"""The configuration's model is pure: no module of agent.config but its sources (which
read files and wait for cloud-init), `validate` (which reads the files it is given) and
the package's exports imports agent.config.sources, directly or through another module.
Checked on grimp's graph, so a new section's module is covered without being listed."""

from __future__ import annotations

import grimp
import pytest

SOURCES = "agent.config.sources"
READERS = {"agent.config", "agent.config.validate"}
"""Allowed to read: the package (it exports load_config) and `config validate FILE`."""


def reading(graph: grimp.ImportGraph) -> dict[str, list[str]]:
    """Modules of the model that reach the sources, with the chain."""
    model = {m for m in graph.find_descendants("agent.config")
             if not (m == SOURCES or m.startswith(SOURCES + "."))} - READERS
    chains = {m: graph.find_shortest_chain(importer=m, imported=SOURCES, as_packages=True)
              for m in sorted(model)}
    return {m: list(chain) for m, chain in chains.items() if chain}


def build() -> grimp.ImportGraph:
    return grimp.build_graph("agent", cache_dir=None)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return build()


def test_the_model_reads_no_source(graph: grimp.ImportGraph) -> None:
    assert len(graph.find_descendants("agent.config")) > 15
    assert reading(graph) == {}


def test_the_check_sees_a_section_that_reads() -> None:
    graph = build()
    graph.add_import(importer="agent.config.timesync", imported="agent.config.checks")
    graph.add_import(importer="agent.config.checks", imported="agent.config.sources.files")
    found = reading(graph)
    assert found["agent.config.checks"] == ["agent.config.checks", "agent.config.sources.files"]
    assert found["agent.config.timesync"][0] == "agent.config.timesync"
