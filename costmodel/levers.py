"""The optimisation path: six levers, which of their gains multiply, and what bounds them.

Two kinds of gain:
- multiplicative: a lever that scales a factor of the whole step. The step time is
  tokens computed x FLOPs per token / FLOP rate, so packing (fewer slots), a lower recompute
  factor (fewer FLOPs per token) and a better GEMM rate (larger micro batch) each divide T,
  and together T / (g1 g2 g3);
- bounded by a share (Amdahl): a lever that speeds up only a part f of the step, such as the
  attention kernel (f = attention share) or communication overlap (f = exposed communication
  share). Its speedup is 1 / (1 - f + f / x), at most 1 / (1 - f).

The figures the scenario does not decide are named in ASSUMPTIONS, with where they come from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import sympy as sp

from costmodel.symbols import T

# ------------------------------------------------------------------ named assumptions


@dataclass(frozen=True)
class Assumption:
    value: object
    source: str


ASSUMPTIONS: dict[str, Assumption] = {
    "expert_parallel": Assumption(8, "course section 06: the project's EP = 8"),
    "micro_batch_speedup": Assumption((1.1, 1.3), "course section 06: micro batch 1 -> 2, "
                                      "'1.1~1.3x', not derived"),
    "communication_share": Assumption(0.03, "course section 06: communication is under 3% "
                                      "of the step"),
    "ce_chunks": Assumption(8, "chunked cross-entropy pieces; the course's 15 GB -> 2 GB is "
                            "about 1/8"),
    "attention_kernel_speedup": Assumption(1.5, "a newer attention kernel (e.g. FlashAttention "
                                           "3 on Hopper) over the current one; to be measured"),
}


def assumed(name: str):
    return ASSUMPTIONS[name].value


# ------------------------------------------------------------------ symbolic forms

share, x = sp.symbols("f x", positive=True)  # part of the step sped up, and by how much
g1, g2, g3 = sp.symbols("g_1 g_2 g_3", positive=True)  # multiplicative gains

#: Amdahl: a part f of the step runs x times faster.
amdahl_speedup = 1 / (1 - share + share / x)
#: ... and the best it can do, when that part costs nothing.
amdahl_limit = sp.limit(amdahl_speedup, x, sp.oo)  # 1 / (1 - f)
#: Three multiplicative levers on the step time.
multiplied_step_time = T / (g1 * g2 * g3)
#: The share of a part that the levers did not touch, after the rest ran G times faster.
G = sp.Symbol("G", positive=True)
share_after = sp.simplify(share / (share + (1 - share) / G))


def amdahl(part: float, speedup: float) -> float:
    return float(amdahl_speedup.subs({share: part, x: speedup}))


def amdahl_bound(part: float) -> float:
    """1 / (1 - f); infinite when the part is the whole step (f = 1, as a float can round to)."""
    if part >= 1:
        return math.inf
    return float(amdahl_limit.subs(share, part))


def untouched_share_after(part: float, speedup_of_rest: float) -> float:
    return float(share_after.subs({share: part, G: speedup_of_rest}))


# ------------------------------------------------------------------ the waterfall


def waterfall(step_time: float, levers: list[tuple[str, float]]) -> list[dict]:
    """The step time lever by lever: each divides what is left by its speedup."""
    rows, now = [], float(step_time)
    for name, speedup in levers:
        after = now / float(speedup)
        rows.append({"lever": name, "speedup": float(speedup), "start": now, "end": after,
                     "saved": now - after})
        now = after
    return rows


# ------------------------------------------------------------------ parallel layouts


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending (in about sqrt(n) steps)."""
    n = int(n)
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


@dataclass(frozen=True)
class Layout:
    """One context-parallel size on a cluster with no TP or PP: DP = GPUs / CP."""

    cp: int
    dp: int
    samples_per_rank: float  # global batch / DP
    batch_divides: bool  # each DP rank gets a whole number of samples
    seq_divides: bool  # seq_len splits into 2 * CP equal chunks (load-balanced CP)
    expert_parallel: tuple[int, ...]  # EP sizes that divide DP (and the experts)

    @property
    def usable(self) -> bool:
        return self.batch_divides and self.seq_divides

    def allows(self, ep: int) -> bool:
        return self.usable and ep in self.expert_parallel

    def micro_batches(self, micro_batch: int) -> bool:
        """Whether each rank's samples split into micro batches of this size."""
        return self.batch_divides and int(self.samples_per_rank) % micro_batch == 0


def layouts(num_gpus: int, global_batch: int, seq_len: int, num_experts: int,
            max_cp: int = 16) -> list[Layout]:
    """Every CP that divides the GPU count (up to max_cp), with DP = GPUs / CP and the EP
    sizes that divide DP and the number of experts (a dense model has EP = 1 only)."""
    rows = []
    for cp in divisors(num_gpus):
        if cp > max_cp:
            break
        dp = num_gpus // cp
        eps = tuple(e for e in divisors(dp) if num_experts and num_experts % e == 0) or (1,)
        rows.append(Layout(cp, dp, global_batch / dp, global_batch % dp == 0,
                           seq_len % (2 * cp) == 0, eps))
    return rows


def valid_pairs(num_gpus: int, global_batch: int, seq_len: int, num_experts: int,
                max_cp: int = 16) -> list[tuple[int, int]]:
    """(CP, EP) pairs that satisfy every divisibility constraint."""
    return [(lay.cp, ep) for lay in layouts(num_gpus, global_batch, seq_len, num_experts, max_cp)
            if lay.usable for ep in lay.expert_parallel]
