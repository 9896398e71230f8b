"""The attention core that 6ND leaves out: QK^T and A V, which multiply activations, not weights.

Per full-attention layer and per sequence of length s, with n_h heads of width d_h:
  QK^T: per head (s x d_h)(d_h x s)  -> 2 s^2 d_h
  A V : per head (s x s)(s x d_h)    -> 2 s^2 d_h
so the forward is 4 s^2 d, with d = n_h * d_h the attention width (not always hidden_size).

Two conventions decide the count, each a scenario key, named here instead of buried:
  - attention_flops (the square): `full`, the course's, PaLM's, nanoGPT's and torchtitan's (the
    whole s x s square), or `causal`, Megatron-LM's since 2025 (a causal kernel skips the upper
    triangle: a = 1/2 of the square);
  - attention_kernel (the backward): `eager` keeps the scores, so the backward is two GEMMs per
    forward GEMM, 2 x forward; `flash` recomputes them (5 GEMMs instead of 4), 2.5 x forward.
Model FLOPs are always forward + 2 x forward (3x), as for the matmuls; hardware FLOPs follow the
kernel and the recompute policy. Only full-attention layers pay the s^2 term (a hybrid model's
linear-attention layers have a term linear in s: F_lin, derive.linear_attention).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from costmodel.derive.flops import gemm_flops, model_flops
from costmodel.derive.plain import convention_of  # noqa: F401 (re-exported)
from costmodel.derive.recompute import recompute_factor
from costmodel.derive.symbols import (
    B,
    F_lin,
    L_full,
    P,
    S,
    T,
    a_sq,
    d_attn,
    d_head,
    k_dim,
    kappa,
    m,
    n,
    n_gpu,
    n_heads,
    r,
    r_core,
    s,
    s_mean,
    sum_sq,
)


def core_forward_per_head(seq=s, width=d_head) -> dict[str, sp.Expr]:
    """The two activation GEMMs of one head."""
    return {"QK^T": gemm_flops(seq, seq, width), "AV": gemm_flops(seq, width, seq)}


#: Forward FLOPs of one layer's attention core, derived: n_h heads, then d = n_h * d_h.
_per_head = core_forward_per_head()
forward_per_layer = sp.expand(n_heads * sum(_per_head.values())).subs(n_heads, d_attn / d_head)
# = 4 s^2 d

#: Backward of a GEMM C = A B with A (m x k), B (k x n): dA = dC B^T, (m x n)(n x k), and
#: dB = A^T dC, (k x m)(m x n). Both are GEMMs of the forward's size, so backward = 2 x forward.
BACKWARD_OVER_FORWARD = sp.cancel(
    (gemm_flops(m, k_dim, n) + gemm_flops(k_dim, n, m)) / gemm_flops(m, n, k_dim)
)  # 2


def flash_backward_gemms(seq=s, width=d_head) -> dict[str, sp.Expr]:
    """The GEMMs of one head's backward in a FlashAttention-style kernel, which keeps no s x s
    score matrix and so recomputes it: S = QK^T again, then dV = P^T dO, dP = dO V^T, and
    dQ = dS K, dK = dS^T Q (softmax and its gradient are elementwise)."""
    return {
        "S = QK^T (recomputed)": gemm_flops(seq, seq, width),
        "dV = P^T dO": gemm_flops(seq, width, seq),
        "dP = dO V^T": gemm_flops(seq, seq, width),
        "dQ = dS K": gemm_flops(seq, width, seq),
        "dK = dS^T Q": gemm_flops(seq, width, seq),
    }


#: Backward over forward of the attention core, by kernel, derived from the GEMM lists: eager
#: (scores kept: two GEMMs per forward GEMM, as for any matmul) 2; flash (scores recomputed:
#: five GEMMs of the forward's size for its two) 5/2.
KERNEL_BACKWARD_OVER_FORWARD: dict[str, sp.Expr] = {
    "eager": BACKWARD_OVER_FORWARD,
    "flash": sp.cancel(sum(flash_backward_gemms().values()) / sum(_per_head.values())),
}

#: Share of the s x s square an attention count takes, by the scenario key attention_flops:
#: full (the course's, PaLM, nanoGPT, torchtitan) or causal (Megatron-LM since 2025: a causal
#: kernel skips the upper triangle).
SQUARE_FRACTION: dict[str, sp.Expr] = {"full": sp.Integer(1), "causal": sp.Rational(1, 2)}


@dataclass(frozen=True)
class Convention:
    name: str
    training_multiplier: sp.Expr  # (forward + backward) / forward
    square_fraction: sp.Expr  # 1 = full s x s square, 1/2 = causal
    source: str


CONVENTIONS = {
    "course": Convention(
        "course (3x, full square)",
        1 + KERNEL_BACKWARD_OVER_FORWARD["eager"],
        SQUARE_FRACTION["full"],
        "course section 06; PaLM appendix B, nanoGPT estimate_mfu, torchtitan",
    ),
    "causal": Convention(
        "causal (3x, half square)",
        1 + KERNEL_BACKWARD_OVER_FORWARD["eager"],
        SQUARE_FRACTION["causal"],
        "Megatron-LM num_floating_point_operations (2025)",
    ),
    "flash": Convention(
        "FlashAttention (3.5x, full square)",
        1 + KERNEL_BACKWARD_OVER_FORWARD["flash"],
        SQUARE_FRACTION["full"],
        "flash-attention benchmarks, torch FlopCounterMode SDPA",
    ),
    "flash_causal": Convention(
        "FlashAttention causal (3.5x, half square)",
        1 + KERNEL_BACKWARD_OVER_FORWARD["flash"],
        SQUARE_FRACTION["causal"],
        "flash-attention benchmarks with causal=True",
    ),
}


def training_per_layer(convention: str = "course", seq=s) -> sp.Expr:
    c = CONVENTIONS[convention]
    return c.training_multiplier * c.square_fraction * forward_per_layer.subs(s, seq)


def step_flops(seq_len, convention: str = "course") -> sp.Expr:
    """Attention-core FLOPs of a step: B sequences of length seq_len, L_full layers."""
    return training_per_layer(convention, seq_len) * L_full * B


#: The two readings of a step, for any convention (a = SQUARE_FRACTION of attention_flops):
#: every sample at the padded length S (B S^2), or at its real length (sum of s_i^2 over the
#: step's samples; without a lengths file, the course's B s_mean^2, equal lengths assumed).
#: Model FLOPs count forward + backward as 3 x forward (two GEMMs per GEMM), whatever the kernel.
_per_square_token = sp.cancel(forward_per_layer / s**2)  # 4 d
attention_padded = (1 + BACKWARD_OVER_FORWARD) * a_sq * _per_square_token * L_full * B * S**2
attention_actual = (1 + BACKWARD_OVER_FORWARD) * a_sq * _per_square_token * L_full * sum_sq
#: Sum of squares when only the mean length is known (the course's reading).
sum_sq_of_mean = B * s_mean**2

#: Hardware FLOPs of the attention core: the forward, the share r_core of it that recompute
#: redoes (the core's own fraction: core_attn or full recompute, derive.recompute), and the
#: kernel's backward (kappa).
_hardware_over_model = sp.cancel((1 + r_core + kappa) / (1 + BACKWARD_OVER_FORWARD))
attention_padded_hardware = _hardware_over_model * attention_padded
attention_actual_hardware = _hardware_over_model * attention_actual

#: Linear attention (gated DeltaNet) is counted with softmax attention in every "with attention"
#: figure: F_lin, its core FLOPs of the step (derive.linear_attention), 0 for other models. Its
#: chunked core is the linear-attention layers' core: recomputed with the core (r_core).
linear_attention_hardware = recompute_factor.subs(r, r_core) * F_lin


def share(attention: sp.Expr) -> sp.Expr:
    """Share of the attention core in all FLOPs (6ND + attention + linear attention)."""
    return attention / (model_flops + attention + F_lin)


def linear_share(attention: sp.Expr) -> sp.Expr:
    """Share of the linear-attention core in all FLOPs, next to `attention`."""
    return F_lin / (model_flops + attention + F_lin)


def mfu_with_attention(attention: sp.Expr) -> sp.Expr:
    return (model_flops + attention + F_lin) / (T * n_gpu * P)


def hfu_with_attention(attention_hardware: sp.Expr) -> sp.Expr:
    """Hardware FLOPs (matmuls with recompute, attention by kernel) over the cluster's peak."""
    return (recompute_factor * model_flops + attention_hardware + linear_attention_hardware) / (
        T * n_gpu * P
    )


def attention_training_flops(
    seq_len, attention_dim, num_full_layers, num_sequences, convention: str = "course"
) -> float:
    """Numeric attention-core training FLOPs for equal-length sequences."""
    expr = step_flops(seq_len, convention)
    return float(expr.subs({d_attn: attention_dim, L_full: num_full_layers, B: num_sequences}))


def sum_of_squares_flops(lengths, attention_dim, num_full_layers, convention="course") -> float:
    """Attention-core FLOPs over real sample lengths: the per-layer term summed per sample
    (varlen / packed with block-diagonal attention), i.e. proportional to sum(s_i^2)."""
    per_token_sq = float(training_per_layer(convention, 1).subs(d_attn, attention_dim))
    return per_token_sq * num_full_layers * sum(int(x) ** 2 for x in lengths)
