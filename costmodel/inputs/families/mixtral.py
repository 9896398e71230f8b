"""mixtral: every layer full attention and MoE (``num_local_experts``); the experts' width is
``intermediate_size``."""

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
    attention = standard_attention(f, b)
    num_experts = f.int("num_local_experts")
    k = experts_per_token(f, num_experts)
    flags = tuple(True for _ in range(b.num_layers))
    intermediate = dense_intermediate(f, flags)
    moe_inter = f.int("intermediate_size")
    return Parts(attention, Mlp(flags, intermediate, num_experts, k, moe_inter))
