"""llama, qwen2, qwen3, mistral: dense decoders, every layer full attention and a dense SwiGLU
MLP.

qwen2 always has q/k/v biases; llama and qwen3 have biases only with ``attention_bias`` (llama
also MLP biases with ``mlp_bias``); qwen3 has q/k RMSNorms. mistral is llama without biases, its
layers local (``sliding_window``, 4096 by default; null: none), counted as full attention."""

from __future__ import annotations

from costmodel.inputs.config import Fields
from costmodel.inputs.families.common import (
    Base,
    Mlp,
    Parts,
    dense_intermediate,
    standard_attention,
)


def resolve(f: Fields, b: Base) -> Parts:
    family = b.family
    attention = standard_attention(f, b, qkv_bias=family == "qwen2")
    flags = tuple(False for _ in range(b.num_layers))
    intermediate = dense_intermediate(f, flags)
    mlp_bias = family == "llama" and f.bool("mlp_bias", False)
    activation = f.name_field("hidden_act", "silu")
    return Parts(attention, Mlp(flags, intermediate, mlp_bias=mlp_bias, activation=activation))
