"""The gated-DeltaNet (linear-attention) core that 6ND leaves out, from the chunked algorithm.

Like the s^2 attention term, the core multiplies activations, not weights: it is not in 6ND (the
in/out projections are) and it grows linearly in s. Per layer, the query/key heads are repeated
to the n_v value heads; per value head, the sequence is cut into chunks of C tokens, with key
width d_k and value width d_v. One chunk of one head runs (``torch_chunk_gated_delta_rule`` in
transformers, the same structure as the FLA kernels):

  (beta K) K^T       (C x d_k)(d_k x C)    2 C^2 d_k   intra-chunk key products
  Q K^T              (C x d_k)(d_k x C)    2 C^2 d_k   intra-chunk attention scores
  UT transform       two unit-lower-triangular C x C solves, with d_v and d_k right-hand sides:
                     C (C - 1) d_v + C (C - 1) d_k
  K_decayed S        (C x d_k)(d_k x d_v)  2 C d_k d_v  state read for the new values
  Q S                (C x d_k)(d_k x d_v)  2 C d_k d_v  state read for the output
  A V_new            (C x C)(C x d_v)      2 C^2 d_v   intra-chunk attention times new values
  K^T V_new          (d_k x C)(C x d_v)    2 C d_k d_v  state write

Divided by the C tokens of the chunk, per token and per value head:
4 C d_k + 2 C d_v + 6 d_k d_v + (C - 1)(d_k + d_v).

Not counted: elementwise work (decays, gating, L2 norms, exp), like softmax for full attention;
the sequence is a multiple of C (the kernel pads to one, and the padding costs the same). The
depthwise causal conv1d before the core is a small term of its own (``conv_forward_per_token``).
Training (forward + backward) is 3x the forward, the same convention as for matmuls.
"""

from __future__ import annotations

import sympy as sp

from costmodel.derive.attention import BACKWARD_OVER_FORWARD
from costmodel.derive.flops import gemm_flops
from costmodel.derive.symbols import C, D, K_conv, L_linear, d_k, d_v, n_k, n_v


def unit_triangular_solve_flops(size, rhs) -> sp.Expr:
    """FLOPs of solving a unit-lower-triangular (size x size) system for ``rhs`` right-hand
    sides by forward substitution: row i takes i multiply-adds per right-hand side."""
    row = sp.Dummy("i", integer=True, nonnegative=True)
    return sp.factor(2 * rhs * sp.summation(row, (row, 0, size - 1)))  # size (size - 1) rhs


def chunk_forward_per_head() -> dict[str, sp.Expr]:
    """The FLOPs of one chunk of one value head, term by term (see the module docstring)."""
    return {
        "(beta K) K^T": gemm_flops(C, C, d_k),
        "Q K^T": gemm_flops(C, C, d_k),
        "UT transform (values)": unit_triangular_solve_flops(C, d_v),
        "UT transform (keys)": unit_triangular_solve_flops(C, d_k),
        "K_decayed S": gemm_flops(C, d_v, d_k),
        "Q S": gemm_flops(C, d_v, d_k),
        "A V_new": gemm_flops(C, d_v, C),
        "K^T V_new": gemm_flops(d_k, d_v, C),
    }


#: Forward FLOPs per token of one gated-DeltaNet layer's core, derived from the chunk's terms:
#: n_v (4 C d_k + 2 C d_v + 6 d_k d_v + (C - 1)(d_k + d_v)).
core_forward_per_token = sp.expand(n_v * sum(chunk_forward_per_head().values()) / C)

#: Forward FLOPs per token of one layer's depthwise causal conv1d: one multiply-add per channel
#: and tap, over conv_dim = 2 n_k d_k + n_v d_v channels (q, k and v).
conv_channels = 2 * n_k * d_k + n_v * d_v
conv_forward_per_token = 2 * conv_channels * K_conv

#: Forward + backward FLOPs of every layer's core over D tokens: (1 + 2) x forward.
core_training = sp.expand((1 + BACKWARD_OVER_FORWARD) * core_forward_per_token * D * L_linear)


def evaluate(expr: sp.Expr, values: dict[sp.Symbol, int]) -> int:
    """An expression above as an exact integer, given integer values for its symbols."""
    result = expr.subs(values)
    if not result.is_Integer:
        raise ValueError(f"{expr} is not an integer at {values}: {result}")
    return int(result)
