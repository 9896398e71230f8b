"""The optimisation path: six levers, which of their gains multiply, and what bounds them.

Two kinds of gain:
- multiplicative: a lever that scales a factor of the whole step. The step time is
  tokens computed x FLOPs per token / FLOP rate, so packing (fewer slots), a lower recompute
  factor (fewer FLOPs per token) and a better GEMM rate (larger micro batch) each divide T,
  and together T / (g_1 g_2 g_3);
- bounded by a share (Amdahl): a lever that speeds up only a part f of the step, such as the
  attention kernel (f = attention share) or communication overlap (f = exposed communication
  share). Its speedup is 1 / (1 - f + f / x), at most 1 / (1 - f).

The figures the scenario does not decide are assumptions: costmodel.inputs.assumptions names
each with where it comes from.
"""

from __future__ import annotations

import math

import sympy as sp

from costmodel.derive.plain import divisors  # noqa: F401 (re-exported)
from costmodel.derive.symbols import G, T, g_1, g_2, g_3, share, x

# ------------------------------------------------------------------ symbolic forms


#: Amdahl: a part f of the step runs x times faster.
amdahl_speedup = 1 / (1 - share + share / x)
#: Three multiplicative levers on the step time.
multiplied_step_time = T / (g_1 * g_2 * g_3)

#: Forms SymPy derives on first use (a limit and a simplification take a third of a second,
#: which a cold `costmodel report` should not pay): read them as module attributes.
#: amdahl_limit: the best a part's speedup can do, when that part costs nothing (1 / (1 - f)).
#: share_after: the share of a part the levers did not touch, after the rest ran G times faster.
_DERIVED = {
    "amdahl_limit": lambda: sp.limit(amdahl_speedup, x, sp.oo),
    "share_after": lambda: sp.simplify(share / (share + (1 - share) / G)),
}
_derived: dict[str, sp.Expr] = {}


def _form(name: str) -> sp.Expr:
    if name not in _derived:
        _derived[name] = _DERIVED[name]()
    return _derived[name]


def __getattr__(name: str) -> sp.Expr:
    if name in _DERIVED:
        return _form(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def amdahl(part: float, speedup: float) -> float:
    """1 / (1 - f + f / x), the value of amdahl_speedup."""
    return 1.0 / (1.0 - part + part / speedup)


def amdahl_bound(part: float) -> float:
    """1 / (1 - f); infinite when the part is the whole step (f = 1, as a float can round to)."""
    if part >= 1:
        return math.inf
    return float(_form("amdahl_limit").xreplace({share: sp.Float(part)}))


def untouched_share_after(part: float, speedup_of_rest: float) -> float:
    return float(
        _form("share_after").xreplace({share: sp.Float(part), G: sp.Float(speedup_of_rest)})
    )


# ------------------------------------------------------------------ the waterfall


def waterfall(step_time: float, levers: list[tuple[str, float]]) -> list[dict]:
    """The step time lever by lever: each divides what is left by its speedup."""
    rows, now = [], float(step_time)
    for name, speedup in levers:
        after = now / float(speedup)
        rows.append(
            {
                "lever": name,
                "speedup": float(speedup),
                "start": now,
                "end": after,
                "saved": now - after,
            }
        )
        now = after
    return rows


# ------------------------------------------------------------------ parallel layouts
