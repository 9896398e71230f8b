"""gpt_oss: GPT-OSS. Attention with biases on q/k/v/o (``attention_bias``, default true) and
one learned sink logit per head; layers alternating local (``sliding_window``, 128 tokens) and
global attention (``layer_types``), the local ones counted as full attention; MoE on every
layer: ``num_local_experts`` experts of width ``intermediate_size``, top ``num_experts_per_tok``,
each expert a gated MLP (GPT-OSS's clamped SwiGLU) with biases on its gate+up and down, a router
with a bias; no shared expert; untied embeddings."""

from __future__ import annotations

from costmodel.inputs.config import Fields
from costmodel.inputs.families.common import (
    Base,
    Mlp,
    Parts,
    dense_intermediate,
    experts_per_token,
    standard_attention,
)


def resolve(f: Fields, b: Base) -> Parts:
    bias = f.bool("attention_bias", True)
    attention = standard_attention(f, b, bias=bias, sinks=True)
    num_experts = f.int("num_local_experts")
    k = experts_per_token(f, num_experts)
    flags = tuple(True for _ in range(b.num_layers))
    intermediate = dense_intermediate(f, flags)
    moe_inter = f.int("intermediate_size")
    mlp = Mlp(
        flags,
        intermediate,
        num_experts,
        k,
        moe_inter,
        activation="swiglu_oai",
        expert_bias=True,
        router_bias=True,
    )
    return Parts(attention, mlp)
