"""nemotron: Nemotron-4 and Minitron. A plain two-matrix MLP (up, down) with squared ReLU
(``relu2``), not gated; LayerNorm1P norms (a weight and a bias); biases on the projections with
``attention_bias`` and ``mlp_bias``; partial rotary embedding (no parameters); untied embeddings
by default."""

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
    attention = standard_attention(f, b)
    flags = tuple(False for _ in range(b.num_layers))
    intermediate = dense_intermediate(f, flags)
    mlp_bias = f.bool("mlp_bias", False)
    activation = f.name_field("hidden_act", "relu2")
    mlp = Mlp(flags, intermediate, mlp_bias=mlp_bias, gated=False, activation=activation)
    return Parts(attention, mlp, norms=Norms(bias=True))
