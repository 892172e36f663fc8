"""`record`: the agent's dataclasses, made without generating code at import.

`dataclasses.dataclass` writes each class's `__init__`, `__repr__`, `__eq__`, `__hash__`
and frozen `__setattr__`/`__delattr__` as source text and compiles it, several `exec`s
per class; over the agent's ~150 classes that was half of a bootstrap's import time
(bench/README.md). `record` lets `dataclass` collect the fields (so `dataclasses.fields`,
`replace` and `asdict` and the camelCase codec work unchanged) and gives the class those
methods as closures over its fields instead: nothing is compiled. They behave as
dataclass's do (positional or keyword arguments, defaults and default factories, fields
with `init=False`, `__post_init__`, equality and hash over the compared fields, frozen
assignment refused with `FrozenInstanceError`); `kw_only`, `InitVar`, `order` and
`slots` are not offered. Each instance costs ~0.6 µs more to make, so classes made in
bulk (the netlink snapshot's entries, the network phase's operations, the phases' changes)
keep `dataclass`.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, frozen: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(dataclasses.field,))
def record(cls: type[T] | None = None, /, *, frozen: bool = False) -> Any:
    """A dataclass (`@record`, `@record(frozen=True)`) whose methods are not generated."""

    def make(cls: type[T]) -> type[T]:
        return _make(cls, frozen)

    return make if cls is None else make(cls)


def _make(cls: type[T], frozen: bool) -> type[T]:
    if "__doc__" not in cls.__dict__ or cls.__doc__ is None:
        cls.__doc__ = cls.__name__  # dataclass would build one from inspect.signature
    dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    cls.__init__ = _init(cls, fields)  # type: ignore[method-assign]
    cls.__repr__ = _repr(tuple(f.name for f in fields if f.repr))  # type: ignore[method-assign]
    compared = _getter(tuple(f.name for f in fields if f.compare))
    cls.__eq__ = _eq(compared)  # type: ignore[method-assign]
    if frozen:
        names = frozenset(f.name for f in fields)
        cls.__setattr__, cls.__delattr__ = _frozen(cls, names)  # type: ignore[method-assign]
        cls.__hash__ = lambda self: hash(compared(self))  # type: ignore[method-assign]
    else:
        cls.__hash__ = None  # type: ignore[assignment]  # eq without frozen: unhashable
    return cls


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The values of `names` as a tuple (dataclass compares and hashes such tuples)."""
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda obj: (one(obj),)
    return operator.attrgetter(*names)


def _init(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> Callable[..., None]:
    params = tuple(f for f in fields if f.init)
    names = tuple(f.name for f in params)
    known = frozenset(names)
    defaults = {f.name: f.default for f in params if f.default is not MISSING}
    factories = {f.name: f.default_factory for f in params
                 if f.default_factory is not MISSING}
    rest = tuple((f.name, f.default, f.default_factory) for f in fields if not f.init)
    post_init = getattr(cls, "__post_init__", None)
    setter = object.__setattr__
    # Python's own messages for a call that does not fit (self counted, as it counts it)
    name = f"{cls.__qualname__}.__init__()"
    required = sum(1 for key in names if key not in defaults and key not in factories)
    takes = (f"{len(names) + 1}" if required == len(names)
             else f"from {required + 1} to {len(names) + 1}")

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(names):
            raise TypeError(f"{name} takes {takes} positional arguments but "
                            f"{len(args) + 1} were given")
        for key in kwargs:
            if key not in known:
                raise TypeError(f"{name} got an unexpected keyword argument {key!r}")
        for key, value in zip(names, args, strict=False):  # args may be fewer
            if key in kwargs:
                raise TypeError(f"{name} got multiple values for argument {key!r}")
            setter(self, key, value)
        missing = []
        for key in names[len(args):]:
            if key in kwargs:
                setter(self, key, kwargs[key])
            elif key in defaults:
                setter(self, key, defaults[key])
            elif key in factories:
                setter(self, key, factories[key]())
            else:
                missing.append(repr(key))
        if missing:
            listed = (missing[0] if len(missing) == 1 else " and ".join(missing)
                      if len(missing) == 2 else ", ".join(missing[:-1]) + f", and {missing[-1]}")
            raise TypeError(f"{name} missing {len(missing)} required positional "
                            f"argument{'s' if len(missing) > 1 else ''}: {listed}")
        for key, default, factory in rest:
            if factory is not MISSING:
                setter(self, key, factory())
            elif default is not MISSING:
                setter(self, key, default)
        if post_init is not None:
            post_init(self)

    return __init__


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{key}={getattr(self, key)!r}" for key in names)
        return f"{type(self).__qualname__}({shown})"

    return __repr__


def _eq(compared: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, object], Any]:
    def __eq__(self: Any, other: object) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    return __eq__


def _frozen(cls: type[Any], names: frozenset[str]
            ) -> tuple[Callable[[Any, str, Any], None], Callable[[Any, str], None]]:
    def __setattr__(self: Any, key: str, value: Any) -> None:
        if type(self) is cls or key in names:
            raise FrozenInstanceError(f"cannot assign to field {key!r}")
        super(cls, self).__setattr__(key, value)

    def __delattr__(self: Any, key: str) -> None:
        if type(self) is cls or key in names:
            raise FrozenInstanceError(f"cannot delete field {key!r}")
        super(cls, self).__delattr__(key)

    return __setattr__, __delattr__
