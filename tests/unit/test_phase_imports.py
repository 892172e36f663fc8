"""The import rules that name the phases, checked for every phase the registry lists (so
a new phase is covered without being listed anywhere else): the phases never import one
another, directly or through another module; and the orchestrator, session, daemon, CLI
and reference import none of them (what they know of a phase comes from the registry)."""

from __future__ import annotations

import grimp
import pytest

from agent.phases import registry

PHASES = [e.target.partition(":")[0] for e in registry.BUILTIN]
UNAWARE = ["agent.orchestrator", "agent.session", "agent.daemon", "agent.cli",
           "agent.commands", "agent.reference"]


def between_phases(graph: grimp.ImportGraph) -> dict[tuple[str, str], list[str]]:
    """Import chains from one phase's package to another's."""
    chains = {(a, b): graph.find_shortest_chain(importer=a, imported=b, as_packages=True)
              for a in PHASES for b in PHASES if a != b}
    return {pair: list(chain) for pair, chain in chains.items() if chain}


def naming_a_phase(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    """(module, phase) where a module that must not know the phases imports one."""
    return [(source, phase) for source in UNAWARE for phase in PHASES
            if graph.direct_import_exists(importer=source, imported=phase, as_packages=True)]


def build() -> grimp.ImportGraph:
    return grimp.build_graph("agent", cache_dir=None)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return build()


def test_every_phase_is_a_package_of_agent_phases(graph: grimp.ImportGraph) -> None:
    assert len(PHASES) >= 4
    assert [p for p in PHASES if not p.startswith("agent.phases.") or p not in graph.modules] \
        == []


def test_phases_are_independent_of_each_other(graph: grimp.ImportGraph) -> None:
    assert between_phases(graph) == {}


def test_only_the_registry_names_a_phase(graph: grimp.ImportGraph) -> None:
    assert naming_a_phase(graph) == []


def test_the_checks_see_an_import_between_phases() -> None:
    graph = build()
    graph.add_import(importer="agent.phases.cni.phase", imported="agent.relay")
    graph.add_import(importer="agent.relay", imported="agent.phases.time.gate")
    graph.add_import(importer="agent.daemon.service", imported="agent.phases.join")
    assert between_phases(graph) == {("agent.phases.cni", "agent.phases.time"): [
        "agent.phases.cni.phase", "agent.relay", "agent.phases.time.gate"]}
    assert naming_a_phase(graph) == [("agent.daemon", "agent.phases.join")]
