"""Why MoE and long sequences make thin, uneven work: GEMM shapes, permute traffic, stragglers.

Tokens per expert. A router sends each token to k of E experts, so over a step an expert sees
D k / E tokens on average (the course's view). A GEMM, though, runs per micro batch and layer:
a micro batch of b sequences fills b S token slots; with expert parallelism (EP) over a group
of e_p ranks, the all-to-all gathers the tokens of the group's e_p micro batches, so one
expert's GEMM has

    M_expert = e_p * b * S * k / E      rows, against      M_dense = b * S

for a dense FFN on one rank. The ratio is e_p k / E.

Permute / unpermute. Before the experts, every token is copied once per chosen expert and
regrouped by expert (permute); after them, the k outputs are gathered back (unpermute). Each
way moves tokens x hidden x beta x k bytes and does no FLOPs: memory-bound work whose time at
best is bytes / HBM bandwidth.

Load imbalance. A skewed router makes some experts hot. The experts live on EP ranks; the MoE
layer ends when the busiest rank ends, so the layer's time scales with the straggler factor
max(rank load) / mean(rank load) (1 = perfectly even). `simulate_router` draws it from a
seeded Zipf-like expert popularity, top-k routing without replacement (Gumbel top-k) and
random balanced placements of experts on ranks (which hot experts share a rank is luck, so
several placements are drawn), next to a load-aware greedy placement.

Arithmetic intensity of a weight GEMM (m x k)(k x n) with m tokens grows with m and saturates at
2 k n / (beta (k + n)); `rows_for_intensity` solves for the m that reaches a given intensity
(a machine balance), from `costmodel.derive.roofline.gemm_intensity`.
"""

from __future__ import annotations

import functools

import sympy as sp

from costmodel.derive import flops, roofline
from costmodel.derive.symbols import (
    E,
    S,
    b_micro,
    bytes_per_element,
    ep,
    h,
    intensity_target,
    k_dim,
    k_top,
    m,
    n,
    tokens,
)

#: The course's view: tokens per expert over a whole step (costmodel.derive.flops).
tokens_per_expert_step = flops.tokens_per_expert
#: Rows of one dense FFN GEMM: the token slots of one micro batch.
dense_rows = b_micro * S
#: Rows of one expert's GEMM per micro batch and layer, with an EP group of e_p ranks.
expert_rows = ep * b_micro * S * k_top / E

#: Bytes one direction (permute, or unpermute) moves for t tokens: every token copied k times.
permute_bytes = tokens * h * bytes_per_element * k_top

#: Derived on first use (SymPy's limit takes a twentieth of a second, which a cold `costmodel
#: report` need not pay); read it as a module attribute.
#: intensity_limit: intensity of a weight GEMM with m token rows, weight (k x n), as m grows
#: without bound, 2kn / (β(k + n)).
_DERIVED = {"intensity_limit": lambda: sp.limit(roofline.gemm_intensity, m, sp.oo)}
_derived: dict[str, sp.Expr] = {}


def __getattr__(name: str) -> sp.Expr:
    if name in _DERIVED:
        if name not in _derived:
            _derived[name] = _DERIVED[name]()
        return _derived[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.lru_cache(maxsize=None)
def _rows_for():
    """The rows m at which roofline.gemm_intensity reaches a target, solved and lambdified once
    (the intensity itself is roofline.intensity)."""
    (rows,) = sp.solve(sp.Eq(roofline.gemm_intensity, intensity_target), m)
    return sp.lambdify((intensity_target, k_dim, n, bytes_per_element), rows, "math")


def gemm(rows, hidden, width, beta: int = 2) -> dict[str, float]:
    """The up projection [rows, hidden] x [hidden, width] of an FFN: shape, FLOPs, intensity."""
    rows, hidden, width = float(rows), int(hidden), int(width)
    return {
        "m": rows,
        "k": hidden,
        "n": width,
        "flops": 2 * rows * hidden * width,
        "intensity": float(roofline.intensity(rows, width, hidden, beta)),
    }


def rows_for_intensity(target, hidden, width, beta: int = 2) -> float | None:
    """Token rows m at which a weight GEMM [m, hidden] x [hidden, width] reaches `target`
    FLOP/byte (solved from roofline.gemm_intensity); None when even m -> infinity stays below."""
    try:
        rows = float(_rows_for()(float(target), hidden, width, beta))
    except ZeroDivisionError:  # target equals the limit: reached only as m -> infinity
        return None
    return rows if rows > 0 else None


# ------------------------------------------------------------------ the simulated router
