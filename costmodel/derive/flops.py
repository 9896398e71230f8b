"""Where 6ND comes from: a GEMM is 2mnk FLOPs, and a linear layer runs three of them.

Convention: one multiply-accumulate = 2 FLOPs (a multiply and an add). A linear layer
y = x W with x of shape (b x i) and W of shape (i x o) runs, per training step:

- forward      y  = x  W       (b x i)(i x o)   2 b i o
- backward, dX  dX = dY W^T     (b x o)(o x i)   2 b i o
- backward, dW  dW = x^T dY     (i x b)(b x o)   2 b i o

Summed over every weight matrix (N = sum of i o) and over the D tokens of a step, the forward
is 2ND and the backward 4ND: the per-parameter-per-token coefficients below are *derived*
from the GEMM shapes, not typed in.
"""

from __future__ import annotations

import sympy as sp

from costmodel.derive.symbols import D, E, N, b_rows, i_in, k_top, o_out


def gemm_flops(m, n, k):
    """FLOPs of an (m x k) @ (k x n) matrix multiply: m n k multiply-adds, 2 FLOPs each."""
    return 2 * m * n * k


def linear_layer_flops(b=b_rows, i=i_in, o=o_out) -> dict[str, sp.Expr]:
    """The three GEMMs of a linear layer y = x W, x: (b x i), W: (i x o)."""
    return {
        "forward": gemm_flops(b, o, i),  # x W
        "backward_input": gemm_flops(b, i, o),  # dY W^T
        "backward_weight": gemm_flops(i, o, b),  # x^T dY
    }


def _per_param_token(expr: sp.Expr) -> sp.Expr:
    """Coefficient of (parameters x tokens) in a linear layer's FLOPs."""
    return sp.cancel(expr / (b_rows * i_in * o_out))


_layer = linear_layer_flops()
#: FLOPs per parameter per token, derived from the GEMM shapes.
FORWARD_PER_PARAM_TOKEN = _per_param_token(_layer["forward"])  # 2
BACKWARD_PER_PARAM_TOKEN = _per_param_token(
    _layer["backward_input"] + _layer["backward_weight"]
)  # 4

#: Forward, backward and training FLOPs of a step over N matmul parameters and D tokens.
forward_flops = FORWARD_PER_PARAM_TOKEN * N * D  # 2ND
backward_flops = BACKWARD_PER_PARAM_TOKEN * N * D  # 4ND
model_flops = forward_flops + backward_flops  # 6ND: the model FLOPs of MFU


#: MoE: N counts only the experts a token is routed to (k of E), so over a step each routed
#: expert sees D k / E tokens on average.
tokens_per_expert = D * k_top / E


def network_flops(shapes: list[tuple], tokens=D) -> dict[str, sp.Expr]:
    """Forward/backward FLOPs of a stack of linear layers with weight shapes [(i, o), ...],
    summed GEMM by GEMM. Used to check that the sum equals 2ND / 4ND with N = sum(i o)."""
    forward = sum(gemm_flops(tokens, o, i) for i, o in shapes)
    backward = sum(gemm_flops(tokens, i, o) + gemm_flops(i, o, tokens) for i, o in shapes)
    params = sum(i * o for i, o in shapes)
    return {"forward": forward, "backward": backward, "params": params}


def training_matmul_flops(n_params, tokens):
    """6 N D as a number: the matmul FLOPs of one training step (no recompute)."""
    return float(model_flops.subs({N: n_params, D: tokens}))
