"""The MLP half of a layer, what it saves: a dense MLP (SwiGLU or GELU) or an MoE layer
(transformers' per-expert loop, Megatron-Core's grouped GEMMs)."""

from __future__ import annotations

from costmodel.derive.activations.ops import gelu_mlp_saved, swiglu_saved
from costmodel.derive.activations.tables import (
    FP32,
    INDEX,
    INT32,
    LINEAR,
    MASK,
    MOE_GEMM,
    Saved,
)


def _moe_loop(
    tokens,
    hidden,
    experts,
    top_k,
    expert_ffn,
    shared_ffn,
    router_fp32,
    norm_topk,
    load,
    ew,
    beta,
    weights_fp32=None,
    shared_gate=False,
):
    """transformers' per-expert loop (``experts_implementation="eager"``)."""
    routed = top_k * tokens * load  # rows the (busiest) rank's experts run
    saved = [Saved("moe.input", beta * tokens * hidden, False, "layernorm")]
    if router_fp32:  # DeepSeek-V3: router logits computed from an fp32 copy of the input
        saved.append(Saved("moe.router_input_fp32", FP32 * tokens * hidden, False, "moe"))
    saved += [
        Saved("moe.router_probs", FP32 * tokens * experts, False, "moe"),
        Saved("moe.topk_indices", INDEX * tokens * top_k, False, "moe"),
    ]
    if norm_topk:  # the top-k weights divided by their sum (fp32)
        saved += [
            Saved("moe.topk_weights", FP32 * tokens * top_k, False, "moe"),
            Saved("moe.topk_sum", FP32 * tokens, False, "moe"),
        ]
    # the routing weights stay fp32 when the router does not cast them back (DeepSeek-V3, Mixtral)
    weight_bytes = FP32 if (router_fp32 if weights_fp32 is None else weights_fp32) else beta
    saved += [
        Saved("moe.dispatch_indices", 2 * INDEX * routed, False, "moe"),
        Saved("moe.routed_input", beta * routed * hidden, False, "moe", MOE_GEMM),
    ]
    saved += swiglu_saved("moe.expert", routed, expert_ffn, beta, ew, "moe", "moe_act")
    saved += [
        Saved("moe.routing_weights", weight_bytes * routed, False, "moe"),
        Saved("moe.expert_output", beta * routed * hidden, False, "moe"),
        Saved("moe.combine_input", beta * routed * hidden, False, "moe"),
    ]
    if shared_ffn:
        saved += swiglu_saved("moe.shared", tokens, shared_ffn, beta, ew, "shared_experts")
        if shared_gate:  # Qwen3-Next: sigmoid(gate(x)) * shared output keeps both factors
            saved += [
                Saved("moe.shared_gate", beta * tokens, False, "shared_experts"),
                Saved("moe.shared_output", beta * tokens * hidden, False, "shared_experts"),
            ]
    return saved


def _moe_grouped(tokens, hidden, experts, expert_ffn, shared_ffn, routed, ew, beta):
    """Megatron-Core's MoE layer: fused router, token permutation, grouped GEMMs (see the module
    docstring for the files). ``routed``: the rows this rank's experts run."""
    saved = [
        Saved("moe.input", beta * tokens * hidden, False, "layernorm"),
        Saved("moe.router_scores", FP32 * tokens * experts, False, "moe"),
        Saved("moe.routing_map", MASK * tokens * experts, False, "moe"),
        Saved("moe.row_id_map", INT32 * tokens * (2 * experts + 1), False, "moe"),
        Saved("moe.routed_input", beta * routed * hidden, False, "moe", MOE_GEMM),
        Saved("moe.sort_chunks_map", INT32 * routed, False, "moe"),
        Saved("moe.permuted_probs", FP32 * routed, False, "moe"),
    ]
    saved += swiglu_saved("moe.expert", routed, expert_ffn, beta, ew, "moe", "moe_act")
    if shared_ffn:
        saved += swiglu_saved("moe.shared", tokens, shared_ffn, beta, ew, "shared_experts")
    return saved


def mlp_tensors(mlp: str, x, tokens) -> list[Saved]:
    """The MLP's saved tensors, its input included: dense (SwiGLU or GELU) or MoE (the loop or
    the grouped GEMMs); ``x``: the layer's options (``layer._Layer``)."""
    beta, elementwise = x.bytes_per_element, x.elementwise
    if mlp == "dense" and x.mlp_activation == "gelu":
        return gelu_mlp_saved("mlp", tokens, x.hidden, x.ffn, beta, elementwise)
    if mlp == "dense":
        saved = [Saved("mlp.input", beta * tokens * x.hidden, False, "layernorm", LINEAR)]
        saved += swiglu_saved("mlp", tokens, x.ffn, beta, elementwise)
        if x.dropout:  # the dropout after the MLP (full hidden width)
            saved.append(Saved("mlp.dropout_mask", MASK * tokens * x.hidden, False))
        return saved
    if x.moe == "grouped":
        routed = x.top_k * tokens * x.expert_load
        return _moe_grouped(
            tokens, x.hidden, x.experts, x.moe_ffn, x.shared_ffn, routed, elementwise, beta
        )
    return _moe_loop(
        tokens,
        x.hidden,
        x.experts,
        x.top_k,
        x.moe_ffn,
        x.shared_ffn,
        x.router_fp32,
        x.norm_topk,
        x.expert_load,
        elementwise,
        beta,
        weights_fp32=x.routing_weights_fp32,
        shared_gate=x.shared_gate,
    )
