"""The attention core that 6ND leaves out: QK^T and A V, which multiply activations, not weights.

Per full-attention layer and per sequence of length s, with n_h heads of width d_h:
  QK^T: per head (s x d_h)(d_h x s)  -> 2 s^2 d_h
  A V : per head (s x s)(s x d_h)    -> 2 s^2 d_h
so the forward is 4 s^2 d, with d = n_h * d_h the attention width (not always hidden_size).

Training multiplies the forward by a convention, named here instead of buried:
  - course / PaLM / nanoGPT / torchtitan: backward = 2 x forward (two GEMMs per GEMM), 3x total,
    the full s x s square;
  - causal: a causal kernel skips the upper triangle, 1/2 of the square;
  - FlashAttention: the backward recomputes QK^T (5 GEMMs instead of 4), 2.5 x forward, 3.5x.
Only full-attention layers pay it (a hybrid model's linear-attention layers have no s^2 term).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from costmodel.derive.flops import gemm_flops, model_flops
from costmodel.derive.symbols import (
    B,
    L_full,
    P,
    S,
    T,
    d_attn,
    d_head,
    k_dim,
    m,
    n,
    n_gpu,
    n_heads,
    s,
    s_mean,
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


@dataclass(frozen=True)
class Convention:
    name: str
    training_multiplier: sp.Expr  # (forward + backward) / forward
    square_fraction: sp.Expr  # 1 = full s x s square, 1/2 = causal
    source: str


CONVENTIONS = {
    "course": Convention(
        "course (3x, full square)",
        1 + BACKWARD_OVER_FORWARD,
        sp.Integer(1),
        "course section 06; PaLM appendix B, nanoGPT estimate_mfu, torchtitan",
    ),
    "causal": Convention(
        "causal (3x, half square)",
        1 + BACKWARD_OVER_FORWARD,
        sp.Rational(1, 2),
        "Megatron-LM num_floating_point_operations (2025)",
    ),
    "flash": Convention(
        "FlashAttention (3.5x, full square)",
        1 + sp.Rational(5, 2),
        sp.Integer(1),
        "flash-attention benchmarks, torch FlopCounterMode SDPA",
    ),
    "flash_causal": Convention(
        "FlashAttention causal (3.5x, half square)",
        1 + sp.Rational(5, 2),
        sp.Rational(1, 2),
        "flash-attention benchmarks with causal=True",
    ),
}


def training_per_layer(convention: str = "course", seq=s) -> sp.Expr:
    c = CONVENTIONS[convention]
    return c.training_multiplier * c.square_fraction * forward_per_layer.subs(s, seq)


def step_flops(seq_len, convention: str = "course") -> sp.Expr:
    """Attention-core FLOPs of a step: B sequences of length seq_len, L_full layers."""
    return training_per_layer(convention, seq_len) * L_full * B


#: The course's two readings: every sample at the padded length S, or at the mean length.
attention_padded = step_flops(S)
attention_actual = step_flops(s_mean)


def share(attention: sp.Expr) -> sp.Expr:
    """Share of the attention core in all FLOPs (6ND + attention)."""
    return attention / (model_flops + attention)


def mfu_with_attention(attention: sp.Expr) -> sp.Expr:
    return (model_flops + attention) / (T * n_gpu * P)


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
