"""What one phase establishes and later ones rely on, as small typed classes: the phases
never import each other, they share these.

A phase declares the facts it provides and those it needs (`Phase.provides`,
`Phase.needs`); its result gives the instances it proved (`PhaseResult.facts()`), read
by later phases and the daemon through `Results`. The registry refuses an order in which
a phase runs before a phase that provides what it needs (agent/phases/registry.py).
"""

from __future__ import annotations

from dataclasses import field

from agent.recordtype import record


class Fact:
    """Base of the facts a phase provides."""


@record(frozen=True)
class NodeAddresses(Fact):
    """Addresses a phase put on the node's links."""

    by_link: dict[str, list[str]] = field(default_factory=dict)
    """Link → `address/prefix`."""


@record(frozen=True)
class ClockChecked(Fact):
    """The clock was checked against its servers before the phases after this one (or
    left to the image, with no servers configured)."""

    synchronised: bool = False
    gated: bool = True
    """False: no servers configured, the clock was not checked."""


@record(frozen=True)
class NodeName(Fact):
    """The Node this machine registered as."""

    name: str = ""


@record(frozen=True)
class ControlPlaneMember(Fact):
    """This machine joined (or initialized) the cluster as a control plane."""


@record(frozen=True)
class CNIConfigList(Fact):
    """A CNI configuration list a phase wrote (the delete policy removes it)."""

    path: str = ""
