"""deepseek_v3, deepseek_v2: multi-head latent attention (MLA) and MoE from
``first_k_dense_replace`` on, every ``moe_layer_freq`` layers, with ``n_shared_experts`` shared
experts. The query latent ``q_lora_rank`` is transformers' 1536 when the config leaves it out, and
none when it is null (DeepSeek-V2-Lite: a plain q projection). DeepSeek-V3's MTP layers
(``num_nextn_predict_layers``) are not counted."""

from __future__ import annotations

import math

from costmodel.derive.plain import head_width
from costmodel.errors import CostModelError
from costmodel.inputs.config import Fields
from costmodel.inputs.families.common import (
    Attention,
    Base,
    Mlp,
    Parts,
    dense_intermediate,
    experts_per_token,
)

#: transformers' q_lora_rank when a DeepSeek config leaves it out (a null one: no query latent)
Q_LORA_DEFAULT = 1536


def resolve(f: Fields, b: Base) -> Parts:
    attention = _mla(f, b)
    num_experts = f.int("n_routed_experts", 0, minimum=0)
    k = experts_per_token(f, num_experts)
    flags = _moe_flags(f, b, num_experts)
    intermediate = dense_intermediate(f, flags)
    n_moe = sum(flags)
    moe_inter = f.int("moe_intermediate_size") if n_moe else 0
    shared = f.int("n_shared_experts", 0, minimum=0) * moe_inter if n_moe else 0
    mtp = f.int("num_nextn_predict_layers", 0, minimum=0) if b.family == "deepseek_v3" else 0
    return Parts(attention, Mlp(flags, intermediate, num_experts, k, moe_inter, shared), mtp=mtp)


def _mla(f: Fields, b: Base) -> Attention:
    """q_a/q_b (or q), kv_a_proj_with_mqa, kv_b, o; the q_a/kv_a norms and optional biases."""
    hidden, num_heads = b.hidden, b.num_heads
    nope = f.int("qk_nope_head_dim")
    rope = f.int("qk_rope_head_dim")
    v_dim = f.int("v_head_dim")
    kv_lora = f.int("kv_lora_rank")
    # absent: transformers' default (DeepseekV2Config, DeepseekV3Config); null: no query latent
    q_lora = f.int("q_lora_rank", 0, minimum=0) if f.has("q_lora_rank") else Q_LORA_DEFAULT
    qk_dim = nope + rope
    bias = f.bool("attention_bias", False)
    if q_lora:
        weights = hidden * q_lora + q_lora * num_heads * qk_dim
        other = q_lora + (q_lora if bias else 0)  # q_a_layernorm (+ q_a bias)
    else:
        weights = hidden * num_heads * qk_dim
        other = 0
    weights += hidden * (kv_lora + rope) + kv_lora * num_heads * (nope + v_dim)
    weights += num_heads * v_dim * hidden
    other += kv_lora  # kv_a_layernorm
    if bias:
        other += (kv_lora + rope) + hidden
    if (num_heads * (qk_dim + v_dim)) % 2:
        raise CostModelError(
            f"config fields 'num_attention_heads' x ('qk_nope_head_dim' + 'qk_rope_head_dim' + "
            f"'v_head_dim') = {num_heads * (qk_dim + v_dim)} is odd; expected an even MLA width"
        )
    attention_dim = num_heads * (qk_dim + v_dim) // 2
    if (qk_dim + v_dim) % 2 == 0:
        head_dim = (qk_dim + v_dim) // 2
    else:
        head_dim = math.floor(head_width(attention_dim, num_heads))
    return Attention(
        num_heads=num_heads,
        num_kv_heads=num_heads,
        head_dim=head_dim,
        qk_dim=qk_dim,
        v_dim=v_dim,
        attention_dim=attention_dim,
        weights=weights,
        other=other,
        mla=True,
        q_lora=q_lora,
        kv_lora=kv_lora,
        rope=rope,
    )


def _moe_flags(f: Fields, b: Base, num_experts: int) -> tuple[bool, ...]:
    if num_experts == 0:
        return tuple(False for _ in range(b.num_layers))
    first_dense = f.int("first_k_dense_replace", 0, minimum=0)
    freq = f.int("moe_layer_freq", 1)
    return tuple(i >= first_dense and i % freq == 0 for i in range(b.num_layers))
