"""`frozen_dataclass`: `@dataclass(frozen=True)` without compiling code per class.

Python 3.11's dataclasses write each class its own `__init__`, `__repr__`, `__eq__`, `__hash__`,
`__setattr__` and `__delattr__` as source text and compile each with `exec`: about 0.5 ms a
class (3 ms for the scenario's 90 fields), a fifth of a cold `costmodel report`'s own work.
Here `dataclasses.dataclass` only collects the fields (so `fields`, `replace`, `asdict` and
`is_dataclass` work as for any dataclass) and the methods are shared functions that read the
fields from the class: the same behaviour (tests/project/test_records.py compares each with a
real frozen dataclass), compiled once. A class built by thousands of instances per report is
better left a plain dataclass (its generated `__init__` is faster per call).

Not supported (refused): keyword-only fields and inheritance between dataclasses (and no
InitVar, `order` or `slots`: none is used)."""

from __future__ import annotations

import dataclasses
import reprlib
from dataclasses import MISSING, FrozenInstanceError

_setattr = object.__setattr__


def frozen_dataclass(cls: type) -> type:
    """`cls` as `@dataclass(frozen=True)` makes it (eq, hash from the compared fields, repr
    of the repr fields, frozen), its methods shared (module docstring)."""
    if any(dataclasses.is_dataclass(base) for base in cls.__mro__[1:]):
        raise TypeError(f"{cls.__qualname__}: frozen_dataclass does not inherit dataclasses")
    if "__setattr__" in cls.__dict__ or "__delattr__" in cls.__dict__:
        raise TypeError(f"{cls.__qualname__}: a frozen dataclass defines no __setattr__")
    own = {name for name in ("__init__", "__repr__", "__eq__") if name in cls.__dict__}
    class_hash = cls.__dict__.get("__hash__", MISSING)
    explicit_hash = not (class_hash is MISSING or (class_hash is None and "__eq__" in own))
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    fields = dataclasses.fields(cls)
    if any(f.kw_only for f in fields):
        raise TypeError(f"{cls.__qualname__}: frozen_dataclass has no keyword-only fields")
    methods = {"__init__": _init(cls, fields), **_methods(cls, fields)}
    for name, function in methods.items():
        if name in own or (name == "__hash__" and explicit_hash):
            continue
        function.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, function)
    return cls


def _init(cls: type, fields: tuple[dataclasses.Field, ...]):
    """The generated `__init__` of a frozen dataclass: the init fields by position or keyword,
    their defaults and default factories, the factories of the fields outside __init__ (one with
    a plain default is read from the class, as dataclass does), then `__post_init__`."""
    init = tuple((f.name, f.default, f.default_factory) for f in fields if f.init)
    init_names = [name for name, _, _ in init]
    after = tuple(
        (f.name, f.default_factory)
        for f in fields
        if not f.init and f.default_factory is not MISSING
    )
    post_init = hasattr(cls, "__post_init__")
    known = frozenset(init_names)
    defaults = {name: default for name, default, _ in init if default is not MISSING}
    made = tuple(
        (name, factory)
        for name, default, factory in init
        if default is MISSING and factory is not MISSING
    )
    required = tuple(name for name, default, factory in init if default is factory is MISSING)

    def __init__(self, *args, **kwargs):
        if args or not kwargs.keys() <= known:
            _positional(self, args, kwargs)
        else:  # keywords alone (a scenario, a shape, a row): the fields set at once
            for name in required:
                if name not in kwargs:
                    raise TypeError(f"__init__() missing 1 required positional argument: '{name}'")
            state = self.__dict__
            state.update(defaults)
            for name, factory in made:
                if name not in kwargs:
                    state[name] = factory()
            state.update(kwargs)
        for name, factory in after:
            _setattr(self, name, factory())
        if post_init:
            self.__post_init__()

    def _positional(self, args, kwargs):
        if len(args) > len(init):
            raise TypeError(
                f"__init__() takes {len(init) + 1} positional arguments but "
                f"{len(args) + 1} were given"
            )
        for name, value in zip(init_names, args):
            if name in kwargs:
                raise TypeError(f"__init__() got multiple values for argument '{name}'")
            _setattr(self, name, value)
        for name, default, factory in init[len(args) :]:
            if name in kwargs:
                value = kwargs.pop(name)
            elif default is not MISSING:
                value = default
            elif factory is not MISSING:
                value = factory()
            else:
                raise TypeError(f"__init__() missing 1 required positional argument: '{name}'")
            _setattr(self, name, value)
        if kwargs:
            unknown = next(iter(kwargs))
            raise TypeError(f"__init__() got an unexpected keyword argument '{unknown}'")

    return __init__


def _methods(cls: type, fields: tuple[dataclasses.Field, ...]) -> dict:
    """`__repr__` (the repr fields, '...' for a recursion), `__eq__` (the compared fields, as a
    tuple, the same class only), `__hash__` (the hashed fields), and the frozen `__setattr__`
    and `__delattr__`, as a frozen dataclass's."""
    names = frozenset(f.name for f in fields)
    compared = tuple(f.name for f in fields if f.compare)
    hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
    shown = tuple(f.name for f in fields if f.repr)

    @reprlib.recursive_repr()
    def __repr__(self):
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({inner})"

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return tuple(getattr(self, n) for n in compared) == tuple(
                getattr(other, n) for n in compared
            )
        return NotImplemented

    def __hash__(self):
        return hash(tuple(getattr(self, name) for name in hashed))

    def __setattr__(self, name, value):
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name):
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return {
        "__repr__": __repr__,
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
    }
