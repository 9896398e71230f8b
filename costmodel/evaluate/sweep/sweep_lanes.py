"""A sweep's points evaluated many at once: the models' scalar code (evaluate.simulate.step_time,
evaluate.simulate.run) run once on a scenario whose numbers that differ between the points are
`Lanes`, a NumPy array of one value per point (costmodel.derive.lanes: the dispatch the formulas use).

Points are grouped by everything that is not a number (the strings, flags and nulls of their
scenarios and model shapes, their layer pattern, where each value came from): a group's points
differ only in numbers, and its scenario and model shape are stacked into one (`stack`). Where
the code branches on numbers the lanes do not agree on (`Diverge`), the group is split by each
lane's answer and each side evaluated again; a group of one point, or one the lanes cannot run
(a number used as a key), is evaluated point by point (`sweep_points.evaluate_point`). Either
way each point's figures are those of the same formulas: IEEE arithmetic, one operation after
another in the same order, so a point's figures equal the report's (tests/evaluate/
test_sweep_model.py); an integer that differs between points is carried as a float64 (no
overflow of NumPy's int64 where Python's int would grow).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Callable

import numpy as np

from costmodel.derive.lanes import NUMBERS, Diverge
from costmodel.inputs.scenario import CONVENTION_KEYS, LAYOUT_KEYS, Conventions, Layout, Scenario
from costmodel.inputs.shape import ModelShape

#: The fewest points a group evaluates on lanes (fewer: point by point, as cheap).
MIN_LANES = 3


class Lanes(np.ndarray):
    """A 1-d array of one number per point whose truth, float, int and index are its lanes' one
    value, else Diverge; `+=` and the like make a new array (scalar code's `x += y` never
    changes an array another figure holds)."""

    is_lanes = True

    def __bool__(self) -> bool:
        answers = self.view(np.ndarray).astype(bool)
        if answers.all():
            return True
        if not answers.any():
            return False
        raise Diverge(answers)

    def one(self):
        """The lanes' value where they all hold it, else Diverge (each lane: equal to the
        first)."""
        values = self.view(np.ndarray)
        same = values == values[0]
        if same.all():
            return values[0].item()
        raise Diverge(same)

    def __float__(self) -> float:
        return float(self.one())

    def __int__(self) -> int:
        return int(self.one())

    def __index__(self) -> int:
        return int(self.one())

    __hash__ = None  # type: ignore[assignment]

    def __ceil__(self):
        return np.ceil(self)

    def __floor__(self):
        return np.floor(self)

    def __format__(self, spec: str) -> str:
        values = self.view(np.ndarray)
        if (values == values[0]).all():
            return format(values[0].item(), spec)
        return f"{format(values.min().item(), spec)}..{format(values.max().item(), spec)}"

    def __iadd__(self, other):
        return self + other

    def __isub__(self, other):
        return self - other

    def __imul__(self, other):
        return self * other

    def __itruediv__(self, other):
        return self / other

    def __ifloordiv__(self, other):
        return self // other

    def __ipow__(self, other):
        return self**other


def lanes(values) -> Lanes:
    """`values`, one number per point, as Lanes (integers as float64)."""
    array = np.asarray(values)
    if array.dtype.kind in "iub":
        array = array.astype(np.float64)
    return array.view(Lanes)


_ITSELF = (str, bool, type(None), frozenset)
_ITSELF_SET = frozenset(_ITSELF)


def signature(value) -> Any:
    """What must be equal for points to share lanes: the value itself, but a number's type only
    (a tuple's or a mapping's, element by element)."""
    kind = type(value)
    if kind in NUMBERS:
        return kind
    if kind in _ITSELF:
        return value
    if kind is tuple or kind is list:
        return (kind, _flat(value))
    if isinstance(value, Mapping):
        return tuple((key, signature(item)) for key, item in value.items())
    return id(value)  # an object (the lengths summarized): the same one


def _stacked(values: list) -> Any:
    """One value per point stacked: the value where all hold it, lanes of numbers, a tuple of
    the stacked elements."""
    first = values[0]
    if all(type(v) is type(first) and v == first for v in values):
        return first
    if type(first) in NUMBERS:
        return lanes(values)
    if isinstance(first, tuple) and all(
        isinstance(v, tuple) and len(v) == len(first) for v in values
    ):
        return tuple(_stacked(list(column)) for column in zip(*values))
    raise TypeError(f"cannot stack {type(first).__name__} values")  # `key` groups them apart


def _columns(rows: list[tuple]) -> list:
    """Each column of the rows (one tuple of values per point) stacked (`_stacked`); a column
    every point holds the same value of is that value, found in C."""
    out = []
    for column in zip(*rows):
        first = column[0]
        if column.count(first) == len(column) and len(set(map(type, column))) == 1:
            out.append(first)
        else:
            out.append(_stacked(list(column)))
    return out


def stack(scenarios: list[Scenario], shapes: list[ModelShape]) -> tuple[Scenario, ModelShape]:
    """One scenario and one model shape for points alike (the same `key`): each number the
    points differ in, lanes; TypeError where they differ in more (a name, a flag, a null, where
    a value came from)."""
    first = scenarios[0]
    alike = (first.sources, first.given, _lengths_key(first.lengths), first.shape_source)
    for sc in scenarios:
        if (sc.sources, sc.given, _lengths_key(sc.lengths), sc.shape_source) != alike:
            raise TypeError("the points' sources differ")
    names = [f.name for f in dataclasses.fields(ModelShape)]
    fields = _columns(list(map(operator.attrgetter(*names), shapes)))
    shape = object.__new__(ModelShape)
    shape.__dict__.update(zip(names, fields))
    keys = tuple(first.values)
    values = dict(zip(keys, _columns([tuple(sc.values.values()) for sc in scenarios])))
    out = object.__new__(Scenario)
    out.__dict__.update(first.__dict__)
    out.__dict__.update(values)
    out.__dict__["values"] = MappingProxyType(values)
    out.__dict__["layout"] = Layout(**{key: values[key] for key in LAYOUT_KEYS})
    out.__dict__["conventions"] = Conventions(**{key: values[key] for key in CONVENTION_KEYS})
    out.__dict__["_shape"] = (shape, first.shape_source)
    return out, shape


def key(sc: Scenario, shape: ModelShape) -> tuple:
    """The points that may share lanes share this: the layout (its sizes place the groups and
    split the stages: the code branches on them), everything of the scenario that is not a
    number, where each key came from, and the model shape's names, flags and layer pattern (a
    group whose shapes still differ in more than numbers cannot be stacked: its points are
    evaluated one by one)."""
    values = tuple(sc.values.values())
    return (
        sc.layout,
        tuple(map(type, values)),
        _flat(value for value in values if type(value) not in NUMBERS),
        tuple(sc.sources.items()),
        tuple(v for v in shape.__dict__.values() if type(v) in _ITSELF),
        shape.layer_types,
        shape.moe_layer_flags,
        sc.shape_source,
        _lengths_key(sc.lengths),
    )


def _flat(values) -> tuple:
    """`signature` of each value (the common kinds inline: a record has dozens of values, a
    layer pattern as many as the layers)."""
    values = tuple(values)
    kinds = set(map(type, values))
    if kinds <= _ITSELF_SET:  # names and flags alone: themselves
        return values
    return tuple(
        kind if kind in NUMBERS else value if kind in _ITSELF else signature(value)
        for value, kind in zip(values, map(type, values))
    )


def _lengths_key(lengths) -> tuple | None:
    """A lengths file summarized: its file read once (the same `raw`), the scenario's length
    and batch it is summarized against (what-ifs summarize it again, a new object each time)."""
    if lengths is None:
        return None
    return (lengths.path, id(lengths.raw), lengths.seq_len, lengths.samples_per_step)


def quick_key(sc: Scenario, shape: ModelShape) -> tuple:
    """A first grouping, cheap: the layout, each value's type, the layer pattern and the
    shape's name (`stack` finds what else differs, and `key` then groups again)."""
    return (
        sc.layout,
        tuple(map(type, sc.values.values())),
        shape.layer_types,
        shape.moe_layer_flags,
        shape.name,
    )


def evaluate(
    scenarios: list[Scenario],
    shapes: list[ModelShape],
    each: Callable[[Scenario, ModelShape], Any],
    split: Callable[[Any, int], list],
) -> list:
    """`each(sc, shape)` of every point: the points of a group (`quick_key`, then `key` where
    they differ in more than numbers) at once on lanes and `split(result, n)` giving each of
    its n lanes' result, else point by point (module docstring)."""
    out: list = [None] * len(scenarios)
    groups: dict[tuple, list[int]] = {}
    for i, (sc, shape) in enumerate(zip(scenarios, shapes)):
        groups.setdefault(quick_key(sc, shape), []).append(i)
    pending = [(members, False) for members in groups.values()]  # (points, grouped by `key`)

    def one_by_one(members) -> None:
        for i in members:
            out[i] = each(scenarios[i], shapes[i])

    while pending:
        members, exact = pending.pop()
        if len(members) < MIN_LANES:
            one_by_one(members)
            continue
        try:
            sc, shape = stack([scenarios[i] for i in members], [shapes[i] for i in members])
        except TypeError:  # alike by the quick key only: grouped again, by `key`
            if exact:
                one_by_one(members)
                continue
            again: dict[tuple, list[int]] = {}
            for i in members:
                again.setdefault(key(scenarios[i], shapes[i]), []).append(i)
            pending += [(group, True) for group in again.values()]
            continue
        try:
            result = each(sc, shape)
        except Diverge as diverged:
            mask = np.asarray(diverged.mask, dtype=bool).tolist()
            pending.append(([i for i, yes in zip(members, mask) if yes], exact))
            pending.append(([i for i, yes in zip(members, mask) if not yes], exact))
            continue
        except TypeError:  # a number the lanes cannot stand for (a key, a cache's argument)
            one_by_one(members)
            continue
        for i, got in zip(members, split(result, len(members))):
            out[i] = got
    return out


def columns(values: list, n: int) -> list[list]:
    """Each of `values` (numbers, or lanes of n) at each of the n lanes: a list per lane (as
    Python numbers, the values a point's own evaluation gives)."""
    table = np.empty((len(values), n))
    for row, value in zip(table, values):
        row[:] = value
    return table.T.tolist()
