"""gpt_neox: GPT-NeoX and Pythia. Fused QKV and the output projection, with biases unless
``attention_bias`` is false; a GELU MLP of ``intermediate_size`` with biases; LayerNorms with
biases; rotary position embedding on ``rotary_pct`` of each head (no parameters); an untied
output layer (``embed_out``) by default. The parallel residual (``use_parallel_residual``)
changes no parameter and no GEMM."""

from __future__ import annotations

from costmodel.inputs.config import Fields
from costmodel.inputs.families.common import (
    Base,
    Mlp,
    Norms,
    Parts,
    dense_intermediate,
    standard_attention,
)


def resolve(f: Fields, b: Base) -> Parts:
    bias = f.bool("attention_bias", True)
    attention = standard_attention(f, b, bias=bias)
    flags = tuple(False for _ in range(b.num_layers))
    intermediate = dense_intermediate(f, flags)
    activation = f.name_field("hidden_act", "gelu")
    mlp = Mlp(flags, intermediate, mlp_bias=True, gated=False, activation=activation)
    return Parts(attention, mlp, norms=Norms(bias=True))
