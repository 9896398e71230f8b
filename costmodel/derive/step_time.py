"""How long one training step takes on one GPU: the closed forms of the step-time model.

A GEMM at its roofline. An (m x k)(k x n) GEMM does 2mnk FLOPs and, reading both inputs and
writing its output once, moves beta (mk + kn + mn) bytes (derive.roofline). A kernel that runs at
a fraction eta of the peak P and eta_m of the bandwidth BW takes the longer of the two times:

    t_gemm = max(2mnk / (eta P), beta (mk + kn + mn) / (eta_m BW)).

It is compute-bound exactly when its intensity 2mnk / (beta (mk + kn + mn)) reaches the machine
balance at the efficiencies, eta P / (eta_m BW). A linear layer's backward is two GEMMs of the
forward's size (dgrad and wgrad: the same three matrix sizes, read and written), so its forward
and backward together take 3 t_gemm.

Memory-bound work (norms, activations, the optimizer step, MoE permutes, the loss) moves Q bytes
and does next to no arithmetic: t = Q / (eta_m BW).

Recompute runs again the forward of what it recomputes: r of the weight GEMMs' forward time
and r_core of the attention core's (the fractions of derive.recompute), before the backward.
(evaluate.simulate.compute_time takes the recomputed modules' own GEMM rows, each at its roofline, where
r is their share of the FLOPs, and leaves the lm_head out of full recompute.)

The pipeline bubble. A stage's compute per step T_c is n_mb micro batches of a forward F and a
backward B_t (B_t including the weight gradient W_t), T_c = n_mb (F + B_t). A schedule leaves the
stage idle for a time the schedules' papers give in F, B_t and W_t:

- 1F1B (Narayanan et al. 2021, arXiv:2104.04473, section 2.2.1): (p - 1)(F + B_t), so the
  bubble is (p - 1) / n_mb of T_c;
- interleaved 1F1B with v model chunks per GPU (ibid., 2.2.2): each chunk's F and B_t are 1/v
  of a stage's, so (p - 1)(F + B_t) / v: (p - 1) / (v n_mb) of T_c;
- zero bubble (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", arXiv:2401.10241): splitting
  the backward into the input gradient and W_t and scheduling the W_t into the bubble; ZB-H1
  leaves (p - 1)(F + B_t - 2 W_t) (DeepSeek-V3 Table 2's ZB1P), ZB-H2 and the automatic
  schedule almost none: counted as 0;
- DualPipe (DeepSeek-V3 report, arXiv:2412.19437, Table 2): (p/2 - 1)(F&B + B_t - 3 W_t), F&B
  a forward and a backward chunk run overlapped, here F + B_t (their compute; the
  communication they hide is the exposed-communication part's business).

The split of a micro batch's compute: a weight GEMM's backward is two of its forwards, one of
them the weight gradient, so with weight GEMMs only B_t = 2F and W_t = F (the attention core
has no weights: W_t is a little less; taken at F). Then DualPipe leaves (p/2 - 1) 2F, which
is (p - 2) / (3 n_mb) of T_c, and ZB-H1 (p - 1) F: a third of 1F1B's.
"""

from __future__ import annotations

import sympy as sp

from costmodel.derive import roofline
from costmodel.derive.flops import gemm_flops
from costmodel.derive.plain import bubble_over_compute, gemm_seconds  # noqa: F401 (re-exported)
from costmodel.derive.symbols import (
    BW,
    P,
    Q_mem,
    eta,
    eta_m,
    k_dim,
    m,
    n,
    n_mb,
    p_p,
    r,
    r_core,
    t_B,
    t_compute,
    t_core_fwd,
    t_F,
    t_gemm_fwd,
    t_W,
    v_pp,
)

#: Time of an (m x k)(k x n) GEMM at its roofline, at efficiencies eta (compute), eta_m (HBM).
gemm_compute_time = gemm_flops(m, n, k_dim) / (eta * P)
gemm_memory_time = roofline.gemm_bytes / (eta_m * BW)
gemm_time = sp.Max(gemm_compute_time, gemm_memory_time)
#: A linear layer's forward and backward (dgrad and wgrad: the forward's size each).
linear_training_time = 3 * gemm_time
#: Memory-bound work of Q bytes.
memory_bound_time = Q_mem / (eta_m * BW)

#: Recompute: the forward again of r of the weight GEMMs and r_core of the attention core.
recompute_time = r * t_gemm_fwd + r_core * t_core_fwd

#: Idle time per step of each schedule, in one micro batch's F, B_t and W_t per stage.
BUBBLE_IDLE: dict[str, sp.Expr] = {
    "1f1b": (p_p - 1) * (t_F + t_B),
    "interleaved": (p_p - 1) * (t_F + t_B) / v_pp,
    "zero_bubble": sp.Integer(0),
    "dualpipe": (p_p / 2 - 1) * ((t_F + t_B) + t_B - 3 * t_W),
}
#: ZB-H1 (the zero-bubble paper's first schedule; DeepSeek-V3 Table 2's ZB1P), for reference.
ZB_H1_IDLE = (p_p - 1) * (t_F + t_B - 2 * t_W)
#: A weight GEMM's backward is two forwards, one of them the weight gradient.
WEIGHT_GEMM_SPLIT = {t_B: 2 * t_F, t_W: t_F}
#: T_c: the stage's compute per step.
stage_compute = n_mb * (t_F + t_B)


def _over_compute(idle: sp.Expr) -> sp.Expr:
    """The idle time as a share of T_c, with the weight-GEMM split."""
    return sp.simplify((idle / stage_compute).subs(WEIGHT_GEMM_SPLIT))


#: The bubble over the stage's compute, per schedule: 1F1B (p - 1)/n_mb, interleaved
#: (p - 1)/(v n_mb), zero bubble 0, DualPipe (p - 2)/(3 n_mb).
BUBBLE_OVER_COMPUTE: dict[str, sp.Expr] = {
    name: _over_compute(idle) for name, idle in BUBBLE_IDLE.items()
}
#: The bubble's seconds per step: that share of T_c.
BUBBLE_SECONDS: dict[str, sp.Expr] = {
    name: share * t_compute for name, share in BUBBLE_OVER_COMPUTE.items()
}
SCHEDULES = tuple(BUBBLE_IDLE)
