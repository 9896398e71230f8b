"""qwen3_moe, qwen3_next, qwen3_5_moe: Qwen MoE decoders, the last two hybrids.

Attention has q/k RMSNorms; qwen3_next always has an output gate (q doubled), qwen3_5_moe one by
default (``attn_output_gate``). The hybrids add gated-DeltaNet layers and a gated shared expert
(``shared_expert_intermediate_size``). MoE layers: every layer for qwen3_5_moe, else those not in
``mlp_only_layers`` with ``(i + 1) % decoder_sparse_step == 0``. qwen3_5_moe's MTP layers
(``mtp_num_hidden_layers``) are not counted."""

from __future__ import annotations

from costmodel.inputs.config import Fields
from costmodel.inputs.families.common import (
    HYBRIDS,
    Base,
    Mlp,
    Parts,
    dense_intermediate,
    experts_per_token,
    gated_deltanet,
    standard_attention,
)


def resolve(f: Fields, b: Base) -> Parts:
    family = b.family
    if family == "qwen3_next":
        attention = standard_attention(f, b, gate=True)
    elif family == "qwen3_5_moe":
        attention = standard_attention(f, b, gate=True, gate_field="attn_output_gate")
    else:
        attention = standard_attention(f, b)
    linear = gated_deltanet(f, b)
    num_experts = f.int("num_experts")
    k = experts_per_token(f, num_experts)
    flags = _moe_flags(f, b)
    intermediate = dense_intermediate(f, flags)
    n_moe = sum(flags)
    moe_inter = f.int("moe_intermediate_size") if n_moe else 0
    hybrid = family in HYBRIDS
    shared = f.int("shared_expert_intermediate_size", 0, minimum=0) if hybrid and n_moe else 0
    mtp = f.int("mtp_num_hidden_layers", 0, minimum=0) if family == "qwen3_5_moe" else 0
    mlp = Mlp(flags, intermediate, num_experts, k, moe_inter, shared, shared_gate=hybrid)
    return Parts(attention, mlp, linear, mtp)


def _moe_flags(f: Fields, b: Base) -> tuple[bool, ...]:
    if b.family == "qwen3_5_moe":
        return tuple(True for _ in range(b.num_layers))
    only_mlp = set(f.int_list("mlp_only_layers"))
    step = f.int("decoder_sparse_step", 1)
    return tuple(i not in only_mlp and (i + 1) % step == 0 for i in range(b.num_layers))
