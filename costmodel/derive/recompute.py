"""Activation recompute as a schedule of passes, and the factor it puts on the FLOPs.

A training step runs the forward (2ND), then the backward (4ND, two GEMMs per forward GEMM).
Recompute re-runs part of the forward during the backward: a fraction r of it. The hardware
then executes (2 + 2r + 4) ND while the model FLOPs stay 6ND, so

    factor(r) = (forward + r * forward + backward) / (forward + backward) = 1 + r/3.

full recompute is r = 1, factor 4/3. Selective recompute redoes only some of the weight GEMMs'
forward (for example the FFN's up and gate projections, or DeepSeek-V3's MLA up-projections):
r is the share N_re / N of the 2ND forward they make up. The attention core is not part of 6ND
(no weights): recomputing it changes the attention term's hardware FLOPs, (1 + r + κ) times its
forward (costmodel.derive.attention), not this factor. The course quotes "about 1.1" for its
selective setting: that is r = 0.3 (30% of the forward FLOPs redone), the default assumption
here (scenario key `selective_recompute_fraction`).
"""

from __future__ import annotations

import sympy as sp

from costmodel.derive.flops import backward_flops, forward_flops, model_flops
from costmodel.derive.symbols import r

#: Hardware FLOPs of a step with a fraction r of the forward recomputed.
hardware_flops_with_recompute = forward_flops + r * forward_flops + backward_flops

#: The recompute factor HFU / MFU as a function of r, derived from the schedule.
recompute_factor = sp.cancel(hardware_flops_with_recompute / model_flops)

#: The course's assumption for "selective" (factor about 1.1).
COURSE_SELECTIVE_FRACTION = sp.Rational(3, 10)

#: Recomputed forward fraction of each named policy (selective: the course's assumption).
POLICIES = {"none": sp.Integer(0), "selective": COURSE_SELECTIVE_FRACTION, "full": sp.Integer(1)}


def fraction(policy: str, selective_fraction=COURSE_SELECTIVE_FRACTION):
    """The recomputed forward fraction r of a policy name: the one place a policy becomes r
    (selective: `selective_fraction`, the scenario key selective_recompute_fraction)."""
    return selective_fraction if policy == "selective" else POLICIES[policy]


def factor(policy: str, selective_fraction=COURSE_SELECTIVE_FRACTION) -> sp.Expr:
    """Exact recompute factor (SymPy number) for a policy name."""
    return recompute_factor.subs(r, sp.nsimplify(fraction(policy, selective_fraction)))


def fraction_for_factor(target) -> sp.Expr:
    """The recomputed forward fraction that yields a given factor (solves factor(r) = target)."""
    (solution,) = sp.solve(sp.Eq(recompute_factor, sp.nsimplify(target)), r)
    return solution
