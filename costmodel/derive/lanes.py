"""Numbers or arrays: the small dispatch that lets the models' formulas, written once in plain
arithmetic, run on one scenario's numbers (the report, without importing NumPy: a cold
`costmodel report` stays cheap) and on NumPy arrays of many (the plan's layouts, the sweep's
points).

A few operations differ between the two: `maximum`, `minimum`, `where` and `as_float` dispatch
here on what they are given: NumPy's where one argument is its array, Python's otherwise; the
floats are the same either way (IEEE arithmetic, one operation after another in the same order).

The sweep runs the models' scalar code itself on a scenario whose numbers that differ between
its points are lanes (evaluate.sweep.sweep_lanes.Lanes: an array of one value per point). What
scalar code does that an array cannot:

- a branch on a comparison (`if a > b`): the answer is the lanes' where they all agree; where
  they do not, `Diverge` carries each lane's answer, and the sweep evaluates each side apart;
- `float(x)`, `int(x)`, an index: the one value where every lane holds it, else `Diverge`;
- a key of a dict: refused (TypeError), as the lanes are no one number; a format gives the
  lanes' range (a row's label, never a figure).
"""

from __future__ import annotations

import sys
from typing import Any


class Diverge(Exception):
    """Lanes that disagree where scalar code needs one answer: `mask`, each lane's answer (a
    NumPy array of booleans)."""

    def __init__(self, mask):
        super().__init__("the lanes disagree")
        self.mask = mask


def numpy_of(*values):
    """NumPy, where one of `values` is its array (NumPy is then loaded), else None."""
    np = sys.modules.get("numpy")
    if np is not None:
        for value in values:
            if isinstance(value, np.ndarray):
                return np
    return None


#: Plain numbers (their types): `maximum` and `minimum` take Python's at once (a report asks
#: thousands); the sweep stacks values of these types into lanes.
NUMBERS = frozenset((int, float))


def maximum(a, b):
    """The larger of `a` and `b`, elementwise for arrays."""
    if type(a) in NUMBERS and type(b) in NUMBERS:
        return max(a, b)
    np = numpy_of(a, b)
    return max(a, b) if np is None else np.maximum(a, b)


def minimum(a, b):
    """The smaller of `a` and `b`, elementwise for arrays."""
    if type(a) in NUMBERS and type(b) in NUMBERS:
        return min(a, b)
    np = numpy_of(a, b)
    return min(a, b) if np is None else np.minimum(a, b)


def where(condition, yes, no):
    """`yes if condition else no`, elementwise for arrays."""
    np = numpy_of(condition, yes, no)
    if np is None:
        return yes if condition else no
    return np.where(condition, yes, no)


def is_lanes(x: Any) -> bool:
    """Whether `x` is the sweep's lanes (evaluate.sweep.sweep_lanes.Lanes), not a number."""
    kind = type(x)
    return kind not in NUMBERS and getattr(kind, "is_lanes", False)


def as_float(x):
    """float(x), or lanes as they are (as floats)."""
    if type(x) in NUMBERS:
        return float(x)
    return x.astype(float) if getattr(type(x), "is_lanes", False) else float(x)
