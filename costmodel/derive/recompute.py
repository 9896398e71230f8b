"""Activation recompute as a schedule of passes, and the factor it puts on the FLOPs.

A training step runs the forward (2ND), then the backward (4ND, two GEMMs per forward GEMM).
Recompute re-runs part of the forward during the backward: a fraction r of it. The hardware
then executes (2 + 2r + 4) ND while the model FLOPs stay 6ND, so

    factor(r) = (forward + r * forward + backward) / (forward + backward) = 1 + r/3.

What is recomputed is a set of modules (Megatron-LM's ``--recompute-modules``, the scenario key
``recompute_modules``), and each costs its forward again. Two fractions follow from the set:

- r, of the weight GEMMs' forward (the 2ND of 6ND): the modules that carry weights, ``mlp`` (the
  dense MLP), ``moe`` (the routed experts a token uses, the router and the shared experts),
  ``shared_experts`` and ``mla_up_proj`` (MLA's query and key/value up-projections), each
  N_m / N of it, N_m its matmul parameters per token;
- r_core, of the attention core's forward (no weights: not in 6ND): 1 when ``core_attn`` is
  recomputed, or the layer is; its hardware FLOPs are (1 + r_core + κ) times its forward
  (costmodel.derive.attention).

``layernorm`` and ``moe_act`` redo elementwise work only: no GEMM FLOPs. ``full`` recompute redoes
the whole forward of the recomputed layers: r = r_core = 1 with every layer (the course's 4/3, and
Narayanan et al. 2021's 8ND, which count the output layer as recomputed though Megatron-LM does not
re-run it), or the recomputed layers' share of a stage's layers (``recompute_method: block``).
The course's "selective about 1.1" is r = 0.3 (``COURSE_SELECTIVE_FRACTION``), a figure the course
assumed; a scenario's ``selective_recompute_fraction`` overrides r the same way.
"""

from __future__ import annotations

import sympy as sp

from costmodel.derive.flops import backward_flops, forward_flops, model_flops
from costmodel.derive.plain import (  # noqa: F401 (re-exported)
    CORE_MODULES,
    WEIGHT_MODULES,
    fractions,
    recomputed_layers,
)
from costmodel.derive.symbols import N, N_m, r

#: Hardware FLOPs of a step with a fraction r of the forward recomputed.
hardware_flops_with_recompute = forward_flops + r * forward_flops + backward_flops

#: The recompute factor HFU / MFU as a function of r, derived from the schedule.
recompute_factor = sp.cancel(hardware_flops_with_recompute / model_flops)

#: The course's assumption for "selective" (factor about 1.1).
COURSE_SELECTIVE_FRACTION = sp.Rational(3, 10)

#: Recomputed forward fraction of each named policy (selective: the course's assumption).
POLICIES = {"none": sp.Integer(0), "selective": COURSE_SELECTIVE_FRACTION, "full": sp.Integer(1)}

#: r from the recomputed modules: their forward, 2 N_m D, over the 2ND forward of the step.
modules_fraction = sp.cancel((2 * N_m) / (2 * N))
#: The factor of a module set, from the same schedule: 1 + N_m / (3N).
modules_factor = sp.cancel(recompute_factor.subs(r, modules_fraction))


def fraction(policy: str, selective_fraction=COURSE_SELECTIVE_FRACTION):
    """The recomputed forward fraction r of a policy name (selective: `selective_fraction`; the
    course's assumption by default). A scenario's r comes from `fractions`."""
    if policy == "selective" and selective_fraction is not None:
        return selective_fraction
    return POLICIES[policy]


def factor(policy: str, selective_fraction=COURSE_SELECTIVE_FRACTION) -> sp.Expr:
    """Exact recompute factor (SymPy number) for a policy name."""
    return recompute_factor.subs(r, sp.nsimplify(fraction(policy, selective_fraction)))


def fraction_for_factor(target) -> sp.Expr:
    """The recomputed forward fraction that yields a given factor (solves factor(r) = target)."""
    (solution,) = sp.solve(sp.Eq(recompute_factor, sp.nsimplify(target)), r)
    return solution
