"""The fixed cost of a step's kernels: how many kernels one layer of each kind launches per
micro batch, forward and backward, and outside the layers, each costing `kernel_launch_overhead`
seconds beyond its roofline time (the `kernel_overhead` part of the step,
evaluate.simulate.compute_time). A step of many small kernels (hundreds of small experts per
layer, a chunked linear-attention core) is then not free.

The seconds per kernel. 4 us by default, an assumption: a launch goes through the CUDA driver
and runtime in about 4 to 6 us (measured on an RTX 5070 Ti with CUDA 13:
susun-blog.com/blog/pegainfer-3-cuda-graph, "From Launch Overhead to CUDA Graph"), and a
framework adds its own dispatch. It is counted in full, as if the host never ran ahead of
the GPU: for a large kernel the next launch hides behind it, for a small one it does not.
Set it from a profile (the gaps between kernels in Nsight Systems), or 0 to leave it out.

What a layer launches per micro batch, (forward, backward):
- each weight GEMM row (evaluate.simulate.gemms) 1 forward, 2 backward (the input's and the
  weight's gradient); a routed expert's row once per expert the GPU holds (E / EP), as
  Transformer Engine's GroupedLinear issues one cuBLAS GEMM per expert;
- the attention core (CORE_KERNELS) by attention_kernel; gated DeltaNet's chunked core
  (LINEAR_CORE_KERNELS, flash-linear-attention's chunk_gated_delta_rule);
- each norm 1 and 1, the two residual adds 2 and 2, each MLP's activation (the dense MLP's,
  or the routed experts' and the shared expert's) 1 and 1;
- an MoE layer's routing and permutation (MOE_ROUTING_KERNELS);
outside the layers, the lm_head (and MTP projection) GEMMs, and the loss 1 and 1.
Not counted: the embedding, RoPE, dropout, the optimizer's multi-tensor kernels, collectives.
"""

from __future__ import annotations

#: A weight GEMM row: forward; backward, the input's gradient and the weight's.
GEMM_KERNELS = (1, 2)
#: The attention core by attention_kernel: one fused kernel each way (FlashAttention-2/-3,
#: cuDNN); eager: Q K^T, the softmax and P V forward, dV, dP, the softmax's gradient, dQ and
#: dK backward.
CORE_KERNELS = {"flash": (1, 1), "eager": (3, 5)}
#: Gated DeltaNet's chunked core: flash-linear-attention's chunk_gated_delta_rule_fwd
#: (chunk_local_cumsum, chunk_scaled_dot_kkt_fwd, solve_tril, recompute_w_u_fwd,
#: chunk_gated_delta_rule_fwd_h, chunk_fwd_o) and _bwd (recompute_w_u_fwd,
#: chunk_gated_delta_rule_fwd_h again, chunk_bwd_dv_local, chunk_gated_delta_rule_bwd_dhu,
#: chunk_bwd_dqkwg, prepare_wy_repr_bwd, two in-place adds, chunk_local_cumsum reversed),
#: fla/ops/gated_delta_rule/chunk.py.
LINEAR_CORE_KERNELS = (6, 9)
#: Per norm; the two residual adds of a layer; per MLP activation.
NORM_KERNELS = (1, 1)
RESIDUAL_KERNELS = (2, 2)
ACTIVATION_KERNELS = (1, 1)
#: An MoE layer's routing and permutation beside its GEMMs, an assumption: Megatron-LM's
#: TopKRouter and all-to-all token dispatcher without moe_router_fusion or
#: moe_permute_fusion (the score function, top-k, the routing map, the tokens per expert,
#: the auxiliary loss; the permutation's indices and gather, the chunks sorted by expert
#: after the all-to-all, and back: the unpermutation's scatter and the weighted sum), about
#: 12 kernels each way.
MOE_ROUTING_KERNELS = (12, 12)
#: Outside the layers: the loss (a fused cross-entropy, forward and backward).
LOSS_KERNELS = (1, 1)


def layer_kernels(
    gemms, norms: int, mixer: str, mlp: str, attention_kernel: str, shared: bool
) -> tuple:
    """(forward, backward) kernels of one layer per micro batch: `gemms` its weight GEMMs (a
    routed expert's row counted once per expert the GPU holds: a number, or an array over the
    plan's layouts), `norms` its norms, its mixer (attention, gated_deltanet) and MLP (dense,
    moe), the attention kernel, and whether an MoE layer has a shared expert (its own
    activation)."""
    core = {"attention": CORE_KERNELS[attention_kernel], "gated_deltanet": LINEAR_CORE_KERNELS}
    activations = 1 + (1 if mlp == "moe" and shared else 0)
    routing = MOE_ROUTING_KERNELS if mlp == "moe" else (0, 0)
    return tuple(
        GEMM_KERNELS[i] * gemms
        + core.get(mixer, (0, 0))[i]
        + norms * NORM_KERNELS[i]
        + RESIDUAL_KERNELS[i]
        + activations * ACTIVATION_KERNELS[i]
        + routing[i]
        for i in (0, 1)
    )


def outside_kernels(gemm_rows: int) -> tuple[int, int]:
    """(forward, backward) kernels per micro batch outside the layers: `gemm_rows` GEMM rows
    (the lm_head, the MTP projection) and the loss."""
    return tuple(GEMM_KERNELS[i] * gemm_rows + LOSS_KERNELS[i] for i in (0, 1))
