"""gemma2, gemma3_text: Gemma 2 and the language model of Gemma 3 (``text_config`` of the
``gemma3`` wrapper). A gated GELU MLP (GeGLU: gate, up, down, ``gelu_pytorch_tanh``); four
RMSNorms a layer (the sandwich norms: before and after attention and the MLP); the head width
``head_dim`` (default 256); tied embeddings by default (the lm_head is the token embedding, still
a matmul per token); sliding-window layers (``layer_types``, else every other layer for gemma2 and
five in six for gemma3_text, window ``sliding_window``) counted as full attention. gemma3_text
also normalises each query and key head. The embedding's scaling by sqrt(hidden) and the logit
soft-capping are element-wise: no parameters, no GEMMs."""

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

GEMMA_HEAD_DIM = 256  # transformers' default head_dim of Gemma2Config and Gemma3TextConfig


def resolve(f: Fields, b: Base) -> Parts:
    attention = standard_attention(f, b, head_dim_default=GEMMA_HEAD_DIM)
    flags = tuple(False for _ in range(b.num_layers))
    intermediate = dense_intermediate(f, flags)
    activation = f.name_field("hidden_activation", "gelu_pytorch_tanh")
    mlp = Mlp(flags, intermediate, activation=activation)
    return Parts(attention, mlp, norms=Norms(per_layer=4))
