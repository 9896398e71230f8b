"""costmodel.records.frozen_dataclass behaves as @dataclass(frozen=True): each behaviour compared
on twin classes (the same body, one of each), and on the package's classes that use it."""

import copy
import dataclasses
import pickle
import sys
from dataclasses import FrozenInstanceError, field

import pytest

from costmodel.records import frozen_dataclass


def _body():
    """A class body with every kind of field the package uses: plain, defaulted, a default
    factory, outside __init__ (with a default, with a factory), not compared, not shown, and a
    __post_init__ that sets a field outside __init__."""

    class Body:
        """A record."""

        name: str
        size: int
        scale: float = 1.5
        tags: list = field(default_factory=list)
        note: str = field(default="", compare=False)
        secret: str = field(default="s", repr=False)
        later: int = field(init=False, default=7)
        made: dict = field(init=False, default_factory=dict)
        total: float = field(init=False, repr=False, compare=False)

        def __post_init__(self):
            object.__setattr__(self, "total", self.size * self.scale)

        @property
        def double(self):
            return 2 * self.size

    return Body


def _twins():
    real = dataclasses.dataclass(frozen=True)(_body())
    ours = frozen_dataclass(_body())
    return real, ours


# module-level twins, so that pickle finds them by name
Real, Ours = _twins()
Real.__qualname__ = Real.__name__ = "Real"
Ours.__qualname__ = Ours.__name__ = "Ours"


def _outcome(call):
    try:
        value = call()
    except Exception as error:  # noqa: BLE001 (the type and message are what is compared)
        return type(error), str(error).replace("Real", "X").replace("Ours", "X")
    return value


def _state(x):
    return {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}, x.__dict__


CALLS = [
    ((), {}),
    (("a",), {}),
    (("a", 2), {}),
    (("a", 2, 3.0, ["t"], "n", "z"), {}),
    (("a", 2, 3.0, ["t"], "n", "z", 9), {}),
    ((), {"name": "a", "size": 2}),
    (("a",), {"size": 2, "note": "x"}),
    (("a", 2), {"size": 3}),
    (("a", 2), {"later": 1}),
    (("a", 2), {"nope": 1}),
    # keywords alone (the fields set at once)
    ((), {"size": 2}),
    ((), {"name": "a", "size": 2, "tags": ["t"], "secret": "z", "scale": 2.0}),
    ((), {"name": "a", "size": 2, "nope": 1}),
    ((), {"name": "a", "size": 2, "later": 1}),
]


@pytest.mark.parametrize("args, kwargs", CALLS)
def test_init_binds_as_a_dataclass(args, kwargs):
    real = _outcome(lambda: Real(*args, **kwargs))
    ours = _outcome(lambda: Ours(*args, **kwargs))
    if isinstance(real, tuple):  # refused alike (the messages name the arguments differently)
        assert isinstance(ours, tuple) and ours[0] is real[0] is TypeError
    else:
        assert _state(ours) == _state(real)


def test_fields_repr_eq_hash_frozen_replace_copy():
    real, ours = Real("a", 2, tags=[1]), Ours("a", 2, tags=[1])
    assert [f.name for f in dataclasses.fields(Ours)] == [f.name for f in dataclasses.fields(Real)]
    assert dataclasses.is_dataclass(ours) and Ours.__match_args__ == Real.__match_args__
    assert repr(ours) == repr(real).replace("Real", "Ours")
    assert dataclasses.asdict(ours) == dataclasses.asdict(real)
    assert ours == Ours("a", 2, tags=[1], note="other")  # note is not compared
    assert ours != Ours("a", 3, tags=[1]) and (ours == real) is False
    assert _outcome(lambda: hash(ours)) == _outcome(lambda: hash(real))  # a list and a dict

    def point():
        class Point:
            x: int
            y: float = 2.0
            label: str = field(default="", hash=False)
            weight: int = field(default=0, compare=False)

        return Point

    real_point = dataclasses.dataclass(frozen=True)(point())
    our_point = frozen_dataclass(point())
    assert hash(our_point(1, label="a")) == hash(real_point(1, label="b")) == hash((1, 2.0))
    for x in (ours, real):
        with pytest.raises(FrozenInstanceError, match="cannot assign to field 'size'"):
            x.size = 3
        with pytest.raises(FrozenInstanceError, match="cannot assign to field 'other'"):
            x.other = 3
        with pytest.raises(FrozenInstanceError, match="cannot delete field 'name'"):
            del x.name
    changed = dataclasses.replace(ours, size=5)
    assert (changed.size, changed.total, changed.tags) == (5, 7.5, [1])
    assert _state(copy.deepcopy(ours)) == _state(ours)
    assert _state(pickle.loads(pickle.dumps(ours))) == _state(ours)
    assert ours.double == 4 and Ours.__init__.__qualname__.endswith("Body.__init__")


def test_an_own_method_is_kept_and_inheritance_is_refused():
    class Own:
        x: int

        def __repr__(self):
            return "mine"

        def __hash__(self):
            return 1

    own = frozen_dataclass(Own)
    assert repr(own(2)) == "mine" and hash(own(2)) == 1
    with pytest.raises(TypeError, match="does not inherit"):
        frozen_dataclass(type("Child", (Ours,), {"__annotations__": {"y": int}}))


def test_the_recursive_repr_is_dotted():
    @frozen_dataclass
    class Node:
        items: list

    node = Node([])
    node.items.append(node)
    assert repr(node) == "test_the_recursive_repr_is_dotted.<locals>.Node(items=[...])"


def test_the_package_uses_it_for_its_many_field_records():
    """The scenario and the model shape (the two largest) are frozen_dataclass records, frozen
    and compared as dataclasses are."""
    from costmodel.inputs import scenario, shape

    sc = scenario.resolve()
    assert sc.__init__.__module__ == "costmodel.records"
    assert shape.ModelShape.__init__.__module__ == "costmodel.records"
    with pytest.raises(FrozenInstanceError):
        sc.seq_len = 1
    assert sc == scenario.resolve() and sc != sc.replace(seq_len=1024)
    assert "costmodel.records" in sys.modules
