"""The course's two exercises (思考题): combining speedups, the part of a step that does not
shrink, and what a shorter step does to the wall time of a whole run.

Combining two levers. If a step's compute time is  slots x (FLOPs per slot) / rate,  packing
changes the slots (B S -> D) and a lighter recompute policy changes the FLOPs per slot
(factor f_now -> f_new); the two factors of a product shrink independently, so the speedups
multiply. Adding their gains (1 + (g_1 - 1) + (g_2 - 1)) undercounts.

The part that does not shrink (Amdahl). If a fraction c of today's step time T is spent in
work the levers do not touch (for example communication that is not overlapped with
compute), a speedup g of the rest gives

    T' = T (1 - c) / g + c T,     overall speedup T / T' = 1 / ((1 - c) / g + c),

and the fixed part's share grows from c to c T / T'.

The run. With the same number of steps, the wall time of a run scales like the step time:
hours' = hours / speedup. The run's size implied by an assumed wall time is
steps = hours x 3600 / T and tokens = steps x D.

The next bottleneck: the model's GEMMs on the roofline are costmodel.evaluate.simulate.gemms.model_gemms.
"""

from __future__ import annotations

import sympy as sp

from costmodel.derive import levers
from costmodel.derive.flops import model_flops
from costmodel.derive.symbols import B, D, H, S, T, f_new, f_now, g, g_1, g_2, rate
from costmodel.derive.symbols import fixed_share as c

# ------------------------------------------------------------------ combining two levers


def compute_time(slots, factor):
    """Compute time of a step: slots computed x hardware FLOPs per slot / sustained rate
    (model FLOPs per token, 6N from costmodel.derive.flops, times the recompute factor)."""
    return slots * factor * (model_flops / D) / rate


#: Speedup of packing (B S -> D slots) and a lighter recompute (f_now -> f_new) together.
combined_speedup_derived = sp.simplify(compute_time(B * S, f_now) / compute_time(D, f_new))

combined_multiply = g_1 * g_2
combined_add = 1 + (g_1 - 1) + (g_2 - 1)

# ------------------------------------------------------------------ the part that does not shrink


step_time_with_fixed_part = T * (1 - c) / g + c * T
#: Amdahl's law (costmodel.derive.levers) with the part sped up f = 1 - c and its speedup x = g.
overall_speedup = sp.simplify(levers.amdahl_speedup.subs({levers.share: 1 - c, levers.x: g}))
#: The untouched part's share after the rest ran g times faster (costmodel.derive.levers.share_after).
fixed_share_after = levers.share_after.subs({levers.share: c, levers.G: g})

# ------------------------------------------------------------------ the run

run_hours_after = H / g
steps_in_run = H * 3600 / T
tokens_in_run = steps_in_run * D


def with_fixed_part(step_time: float, fixed_share: float, speedup: float) -> dict[str, float]:
    """Step time, overall speedup and the fixed part's new share when only (1 - fixed_share)
    of the step speeds up by `speedup`."""
    if not 0 <= fixed_share < 1:
        raise ValueError(f"fixed_share {fixed_share!r}: expected 0 <= share < 1")
    if speedup <= 0:
        raise ValueError(f"speedup {speedup!r}: expected > 0")
    overall = levers.amdahl(1 - fixed_share, speedup)
    return {
        "step_time": step_time / overall,
        "speedup": overall,
        "fixed_share": levers.untouched_share_after(fixed_share, speedup),
    }


def run_after(
    hours: float, step_time: float, tokens_per_step: float, speedup: float
) -> dict[str, float]:
    """The run implied by `hours` of wall time at `step_time` per step, and its new wall time."""
    steps = hours * 3600 / step_time
    return {"steps": steps, "tokens": steps * tokens_per_step, "hours_after": hours / speedup}


# ------------------------------------------------------------------ the model's real config
