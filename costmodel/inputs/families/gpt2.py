"""gpt2: GPT-2 and GPT-3-shaped models (``n_embd``, ``n_layer``, ``n_head``, ``n_positions``,
``n_inner``). Every layer full attention (GPT-3's alternating locally banded sparse layers are not
written in a config: a GPT-3 size given as GPT-2 numbers is counted dense); fused QKV and the
output projection with biases; a GELU MLP of ``n_inner`` (default 4 x hidden) with biases;
LayerNorms with biases; learned absolute position embeddings (``n_positions`` rows); the lm_head
tied to the token embedding by default."""

from __future__ import annotations

from costmodel.inputs.config import Fields
from costmodel.inputs.families.common import Base, Mlp, Norms, Parts, standard_attention


def resolve(f: Fields, b: Base) -> Parts:
    attention = standard_attention(f, b, bias=True)
    flags = tuple(False for _ in range(b.num_layers))
    intermediate = f.int("intermediate_size", 4 * b.hidden)
    activation = f.name_field("activation_function", "gelu_new")
    mlp = Mlp(flags, intermediate, mlp_bias=True, gated=False, activation=activation)
    positions = f.int("max_position_embeddings", 1024)
    return Parts(attention, mlp, norms=Norms(bias=True), position_embeddings=positions)
