"""Model shapes and parameter counts read from a Hugging Face ``config.json``.

This module is pure Python (``json`` and the standard library only) so that ``costmodel params``
starts fast; it imports neither sympy, numpy nor torch. The FLOPs of the gated-DeltaNet core
are evaluated in ``costmodel.evaluate.simulate.linear``.

Where things are: ``costmodel.inputs.config`` reads a config and its fields (``load_config``,
``PRESETS``, ``read_input``, ``MAX_INPUT_BYTES``), ``costmodel.inputs.shape`` holds
``ModelShape``, ``costmodel.inputs.families`` resolves the blocks of each family (one module per
family), and ``costmodel.present.params`` renders ``costmodel params`` as text. This module is
the public face: every name below is importable from here.

Reading a config
----------------
``load_config`` accepts a file path or a preset name (``PRESETS``), ``shape_from_config`` turns
the dict into a frozen ``ModelShape`` and ``load_shape`` does both. A config may be flat (the
usual ``config.json`` of a causal LM) or a multimodal wrapper whose language model sits under
``text_config`` (``qwen3_5_moe``); only the language model is counted: no vision tower, no
multi-token-prediction (MTP) layers (``num_nextn_predict_layers``, ``mtp_num_hidden_layers``):
they are counted apart (``mtp_params``, ``mtp_activated_params``) and join N only when a scenario
sets ``count_mtp``.
Optional fields take the default that ``transformers`` gives them (``num_key_value_heads`` =
``num_attention_heads``, ``head_dim`` = ``hidden_size // num_attention_heads``,
``tie_word_embeddings`` false, ``full_attention_interval`` 4 for the hybrids, ...). Bad input
(missing file, bad JSON, a missing or malformed required field, an unsupported ``model_type``)
raises ``CostModelError`` with a one-line message.

Layer layout
------------
Full attention vs linear attention (gated DeltaNet) per layer comes from ``layer_types`` when the
config has it, else from ``full_attention_interval`` (layer ``i`` is full when
``(i + 1) % interval == 0``), else every layer is full attention. Dense MLP vs MoE per layer:
``qwen3_moe``/``qwen3_next``: MoE unless ``i in mlp_only_layers`` or
``(i + 1) % decoder_sparse_step != 0``; ``deepseek_v3``, ``deepseek_v2``: MoE when
``i >= first_k_dense_replace`` and ``i % moe_layer_freq == 0``; ``mixtral``, ``qwen3_5_moe`` and
``gpt_oss``: every layer is MoE.

Sliding-window (local) attention layers (``layer_types`` entries ``sliding_attention``, else the
family's layout: every layer for ``mistral``, every other one for ``gemma2`` and ``gpt_oss``, five
in six for ``gemma3_text``; window ``sliding_window``, null for none) are full-attention layers
here: they have the same projections, and the FLOP account counts their core over the whole
sequence, as transformers' eager attention computes it (exact for a windowed kernel while
seq_len <= window, an upper bound beyond). ``ModelShape.num_sliding_window_layers`` and
``sliding_window`` name them.

Which tensor counts where
-------------------------
Every parameter tensor of the model falls in exactly one component of ``ModelShape.breakdown``:

=======================  ========================================================================
component                tensors
=======================  ========================================================================
attention                weight matrices of the full-attention layers: q/k/v/o projections (q is
                         doubled when there is an output gate: ``attn_output_gate``, qwen3_next);
                         MLA: q_a, q_b (or q), kv_a_proj_with_mqa, kv_b, o
linear_attention         weight matrices of the gated-DeltaNet layers: in_proj_qkvz + in_proj_ba
                         (qwen3_next) or in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
                         (qwen3_5_moe), out_proj
router                   the MoE gate (router) matrix, num_experts x hidden_size per MoE layer
routed_experts_total     all routed experts (gate, up and down matrices), every MoE layer
routed_experts_active    routed_experts_total x experts_per_token / num_experts (not a tensor of
                         its own: the share of routed experts one token uses)
shared_experts           shared expert(s) (gate, up, down) and the 1 x hidden shared-expert gate
dense_mlp                gate/up/down of the dense MLP layers (up/down of a two-matrix MLP: GELU,
                         squared ReLU)
norms_and_other          every vector and non-matmul tensor: norm weights (per layer, final,
                         q/k norms, MLA q_a/kv_a norms, DeltaNet gated norm; LayerNorm biases),
                         biases (qwen2 q/k/v biases, ``attention_bias``, ``mlp_bias``, GPT-2 and
                         GPT-NeoX projection biases, GPT-OSS expert and router biases), GPT-OSS's
                         attention sinks, the DeltaNet depthwise conv1d kernel, A_log and dt_bias
embedding                the input embeddings: vocab_size x hidden_size, and the learned
                         position embeddings (GPT-2/3: max_position_embeddings x hidden_size)
lm_head                  the output projection, vocab_size x hidden_size, always listed, also
                         when it is tied to the embedding (it is still a matmul per token)
=======================  ========================================================================

From these components:

- ``total_params`` (as published; tied weights counted once) = every component except
  ``routed_experts_active``, with ``lm_head`` left out when ``tie_word_embeddings`` is true.
- ``activated_params_published`` = ``total_params - routed_experts_total +
  routed_experts_active``: every parameter except the routed experts, plus the routed experts
  times k/E. It includes the input embedding, the norms and the lm_head (once, if tied). This is
  what model cards call "active" (e.g. "A3B").
- ``activated_params`` = the project's N in 6ND: the parameters taking part in a matrix multiply
  for each token = attention + linear_attention + router + routed_experts_active +
  shared_experts + dense_mlp + lm_head (counted even when tied). The input embedding is a lookup
  (no FLOPs) and ``norms_and_other`` are not matmul weights, so both are left out. This is the N
  for which ``torch.utils.flop_counter.FlopCounterMode`` counts exactly 6·N·tokens of weight
  matmuls in a forward+backward pass (see ``costmodel.validate``).

Buffers are not parameters: DeepSeek-V3's ``e_score_correction_bias`` (a buffer in
``transformers``, 256 values per MoE layer) is not counted.

Attention width
---------------
``attention_dim`` is the width the attention core (QKᵀ and AV) works on: ``num_heads *
head_dim`` (not ``hidden_size``: Qwen3.6-35B-A3B has 16 x 256 = 4096 with hidden_size 2048). For
MLA (deepseek_v3), QKᵀ runs on ``qk_head_dim = qk_nope_head_dim + qk_rope_head_dim`` and AV on
``v_head_dim``, so the forward core costs ``2·s²·num_heads·(qk_head_dim + v_head_dim)``; to keep
the ``4·s²·attention_dim`` form we set ``attention_dim = num_heads * (qk_head_dim + v_head_dim) /
2`` and ``head_dim = (qk_head_dim + v_head_dim) / 2`` (DeepSeek-V3: 128 x 160 = 20480), with the
real ``qk_head_dim`` and ``v_head_dim`` kept as fields of their own.
"""

from __future__ import annotations

from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.inputs.config import MAX_INPUT_BYTES, PRESETS, Fields, load_config, read_input
from costmodel.inputs.families import FAMILIES, SUPPORTED_MODEL_TYPES, resolve_family
from costmodel.inputs.families.common import base, build_shape
from costmodel.inputs.shape import BREAKDOWN_KEYS, FULL_ATTENTION, LINEAR_ATTENTION, ModelShape

__all__ = [
    "PRESETS",
    "SUPPORTED_MODEL_TYPES",
    "BREAKDOWN_KEYS",
    "FULL_ATTENTION",
    "LINEAR_ATTENTION",
    "MAX_INPUT_BYTES",
    "ModelShape",
    "read_input",
    "load_config",
    "shape_from_config",
    "load_shape",
    "scenario_keys",
    "params_json",
]


def shape_from_config(cfg: dict, name: str = "") -> ModelShape:
    """Derive a ``ModelShape`` (layout and parameter counts) from a config dict: find the family,
    read the fields every family has, then the family's own blocks, and sum them."""
    family, inner, outer = resolve_family(cfg)
    fields = Fields(inner, family)
    common = base(fields, outer)
    return build_shape(name, common, FAMILIES[family](fields, common))


def load_shape(path_or_preset: str) -> ModelShape:
    """``shape_from_config(load_config(path_or_preset))``, named after the file or preset."""
    cfg = load_config(path_or_preset)
    text_arg = str(path_or_preset)
    name = text_arg if text_arg in PRESETS else Path(text_arg).stem
    return shape_from_config(cfg, name=name)


# ---------------------------------------------------------------------------------------------
# outputs


def scenario_keys(shape: ModelShape, count_mtp: bool = False) -> dict:
    """The scenario keys a model config fills in (with ``count_mtp``, N and the total include the
    multi-token-prediction layers: ``mtp_activated_params`` and ``mtp_params``).

    ``full_attention_every`` is the period of the full-attention layers; when they are not
    periodic, the value chosen is the smallest p with ``num_layers // p ==
    num_full_attention_layers`` (so the scenario's count of full layers is right), and
    ``CostModelError`` is raised when no p gives that.
    """
    every = shape.full_attention_every
    if every is None:
        n, full = shape.num_layers, shape.num_full_attention_layers
        every = next((p for p in range(1, n + 2) if n // p == full), None)
        if every is None:
            raise CostModelError(
                f"model '{shape.name or shape.model_type}': its {full} full-attention layers out of "
                f"{n} cannot be written as num_layers // full_attention_every"
            )
    return {
        "activated_params": shape.activated_params
        + (shape.mtp_activated_params if count_mtp else 0),
        "total_params": shape.total_params + (shape.mtp_params if count_mtp else 0),
        "hidden_size": shape.hidden_size,
        "num_layers": shape.num_layers,
        "full_attention_every": every,
        "num_heads": shape.num_heads,
        "head_dim": shape.head_dim,
        "attention_dim": shape.attention_dim,
        "num_experts": shape.num_experts,
        "experts_per_token": shape.experts_per_token,
        "vocab_size": shape.vocab_size,
        # the keys of a model given by numbers (null where the config's layout has no such key)
        "ffn_hidden_size": shape.intermediate_size if shape.num_dense_layers else None,
        "mlp_activation": shape.mlp_activation,
        "num_kv_heads": shape.num_kv_heads,
        "moe_ffn_hidden_size": shape.moe_intermediate_size if shape.is_moe else None,
        "shared_experts": shape.num_shared_experts if shape.is_moe else None,
        "first_dense_layers": shape.first_dense_layers,
    }


def params_json(shape: ModelShape) -> dict:
    """A JSON-ready dict of the counts, the layout and the per-component breakdown."""
    return {
        "name": shape.name,
        "model_type": shape.model_type,
        "total_params": shape.total_params,
        "activated_params": shape.activated_params,
        "activated_params_published": shape.activated_params_published,
        "embedding_params": shape.embedding_params,
        "lm_head_params": shape.lm_head_params,
        "tie_word_embeddings": shape.tie_word_embeddings,
        "hidden_size": shape.hidden_size,
        "num_layers": shape.num_layers,
        "num_full_attention_layers": shape.num_full_attention_layers,
        "num_linear_attention_layers": shape.num_linear_attention_layers,
        "full_attention_every": shape.full_attention_every,
        "num_heads": shape.num_heads,
        "num_kv_heads": shape.num_kv_heads,
        "head_dim": shape.head_dim,
        "attention_dim": shape.attention_dim,
        "vocab_size": shape.vocab_size,
        "num_experts": shape.num_experts,
        "experts_per_token": shape.experts_per_token,
        "num_moe_layers": shape.num_moe_layers,
        "num_dense_layers": shape.num_dense_layers,
        "intermediate_size": shape.intermediate_size,
        "moe_intermediate_size": shape.moe_intermediate_size,
        "shared_expert_intermediate_size": shape.shared_expert_intermediate_size,
        "shared_experts": shape.num_shared_experts,
        "first_dense_layers": shape.first_dense_layers,
        "mlp_activation": shape.mlp_activation,
        "hidden_act": shape.hidden_act,
        "norm": shape.norm,
        "norms_per_layer": shape.norms_per_layer,
        "position_embeddings": shape.position_embeddings,
        "sliding_window": shape.sliding_window,
        "num_sliding_window_layers": shape.num_sliding_window_layers,
        "attention_sinks": shape.attention_sinks,
        "num_mtp_layers_excluded": shape.num_mtp_layers_excluded,
        "num_mtp_layers": shape.num_mtp_layers,
        "mtp_params": shape.mtp_params,
        "mtp_activated_params": shape.mtp_activated_params,
        "activated_params_with_mtp": shape.activated_params + shape.mtp_activated_params,
        "breakdown": shape.breakdown,
    }
