"""`record` makes classes that behave as `dataclasses.dataclass` makes them: each case is
run on both and must give the same answer (or the same kind of error)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agent.recordtype import record

AGENT = Path(__file__).parents[2] / "agent"
BULK = {
    "agent/netlink/observe.py", "agent/netlink/rtnl.py", "agent/phases/base.py",
    "agent/phases/network/apply.py",
}
"""Modules whose dataclasses are made in bulk (an entry per address, link, route or
change): they keep dataclass's generated methods, ~0.6 µs faster per instance."""


def kinds(make: Callable[..., Any]) -> dict[str, type]:
    """The same classes, made by `make` (dataclass or record)."""

    @make(frozen=True)
    class Point:
        x: int
        y: int = 0
        tags: list[str] = field(default_factory=list)
        LIMIT: ClassVar[int] = 3

    @make(frozen=True)
    class Point3(Point):
        z: int = 5

    @make
    class Counter:
        name: str
        count: int = 0
        seen: set[str] = field(default_factory=set, compare=False, repr=False)
        cache: dict[str, int] = field(default_factory=dict, init=False, compare=False)

    @make
    class Checked:
        low: int
        high: int
        width: int = field(default=0, init=False)

        def __post_init__(self) -> None:
            self.width = self.high - self.low

    return {"Point": Point, "Point3": Point3, "Counter": Counter, "Checked": Checked}


def stdlib(cls: type | None = None, /, *, frozen: bool = False) -> Any:
    return dataclasses.dataclass(cls, frozen=frozen) if cls else dataclasses.dataclass(
        frozen=frozen)


PLAIN, RECORD = kinds(stdlib), kinds(record)


def outcome(action: Callable[[dict[str, type]], Any], classes: dict[str, type]) -> Any:
    """What `action` gives, or the type of its error and its message without the class's
    qualified name (the two sets of classes live in different functions)."""
    try:
        return action(classes)
    except Exception as err:  # compared between the two kinds
        return type(err).__name__, re.sub(r"\w+\.<locals>\.", "", str(err))


CASES: dict[str, Callable[[dict[str, type]], Any]] = {
    "positional": lambda c: dataclasses.astuple(c["Point"](1, 2, ["a"])),
    "keywords and defaults": lambda c: dataclasses.asdict(c["Point"](y=4, x=3)),
    "a factory per instance": lambda c: c["Point"](1).tags is not c["Point"](1).tags,
    "missing argument": lambda c: c["Point"](),
    "missing arguments": lambda c: c["Checked"](),
    "missing ones named in order": lambda c: c["Point3"](y=2, z=3),
    "too many arguments": lambda c: c["Point"](1, 2, [], 4),
    "too many without defaults": lambda c: c["Checked"](1, 2, 3),
    "unknown keyword": lambda c: c["Point"](1, w=2),
    "given twice": lambda c: c["Point"](1, x=2),
    "inherited fields first": lambda c: dataclasses.astuple(c["Point3"](1, 2, [], 9)),
    "equal": lambda c: c["Point"](1, 2) == c["Point"](1, 2),
    "not equal": lambda c: c["Point"](1, 2) == c["Point"](1, 3),
    "another class is not equal": lambda c: c["Point"](1) == c["Point3"](1),
    "hash follows equality": lambda c: hash(c["Point"](1, 2, ())) == hash(
        c["Point"](1, 2, ())),  # type: ignore[arg-type]
    "frozen assignment": lambda c: setattr(c["Point"](1), "x", 2),
    "frozen deletion": lambda c: delattr(c["Point"](1), "x"),
    "frozen new attribute": lambda c: setattr(c["Point"](1), "other", 2),
    "a mutable record is not hashable": lambda c: hash(c["Counter"]("a")),
    "a mutable record changes": lambda c: (lambda r: (setattr(r, "count", 2), r.count))(
        c["Counter"]("a"))[1],
    "compare=False is not compared": lambda c: c["Counter"]("a", 1, {"x"}) == c["Counter"](
        "a", 1),
    "init=False takes its factory": lambda c: c["Counter"]("a").cache,
    "init=False is no argument": lambda c: c["Counter"]("a", cache={}),
    "__post_init__ runs": lambda c: c["Checked"](2, 7).width,
    "repr": lambda c: re.sub(r"\w+\.<locals>\.", "", repr(c["Counter"]("a", 2))),
    "repr of a frozen one": lambda c: repr(c["Point"](1, tags=["t"])).rsplit(".", 1)[-1],
    "replace": lambda c: dataclasses.astuple(dataclasses.replace(c["Point"](1, 2), y=7)),
    "fields": lambda c: [f.name for f in dataclasses.fields(c["Counter"])],
    "is a dataclass": lambda c: dataclasses.is_dataclass(c["Point3"]),
    "class variables are no field": lambda c: c["Point"].LIMIT,
    "match arguments": lambda c: c["Point3"].__match_args__,
    "copy": lambda c: copy.deepcopy(c["Point"](1, 2, ["a"])) == c["Point"](1, 2, ["a"]),
}


@pytest.mark.parametrize("case", CASES)
def test_a_record_behaves_as_a_dataclass(case: str) -> None:
    assert outcome(CASES[case], RECORD) == outcome(CASES[case], PLAIN)


@record(frozen=True)
class Pickled:
    name: str
    values: tuple[int, ...] = ()


def test_a_record_pickles_and_compares_after() -> None:
    item = Pickled("a", (1, 2))
    assert pickle.loads(pickle.dumps(item)) == item


def test_the_node_package_makes_its_dataclasses_as_records() -> None:
    """The design's rule (docs/design.md): only the bulk modules use dataclass."""
    users = {str(path.relative_to(AGENT.parent)) for path in AGENT.rglob("*.py")
             if re.search(r"^@(dataclasses\.)?dataclass\b(?!_)", path.read_text(), re.M)}
    assert users == BULK
