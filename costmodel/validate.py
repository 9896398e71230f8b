"""Cross-check costmodel's FLOP terms against ``torch.utils.flop_counter.FlopCounterMode``.

Run ``python -m costmodel.validate --out costmodel/course/flop_counter.csv`` (needs the pins in
``validate-requirements.txt``: torch and transformers; no network, no weights).

For each tiny, randomly initialised model below, built with ``transformers`` from a config dict,
one training step (forward, cross-entropy loss on the logits, backward) runs under
``FlopCounterMode`` with a fixed seed, on a batch of B sequences of length s (T = B·s tokens).
Attention runs the eager path (``attn_implementation="eager"``: two batched matmuls, QKᵀ and AV)
and MoE experts the eager per-expert loop (``experts_implementation="eager"``): the default
``grouped_mm`` path and CPU SDPA both count 0 FLOPs in the counter.

The counted FLOPs are split by operator and by layer:

- ``aten.mm``/``aten.addmm`` are the weight matmuls (every ``nn.Linear``, the routers, the
  per-expert ``F.linear`` calls, the lm_head; ``F.linear`` on a 3-D input becomes ``mm``). They are
  compared with ``6·N·T``, N = ``ModelShape.activated_params`` computed by ``costmodel.inputs.models``
  from the same config dict (lm_head included, input embedding excluded).
- ``aten.bmm`` inside the full-attention layers is the attention core, compared with
  ``attention_training_flops(s, attention_dim, num_full_layers, B)`` = 3·4·s²·attention_dim·
  L_full·B (full square: the eager path multiplies the whole s×s matrix and masks it, so there
  is no causal halving to undo).
- ``aten.bmm`` inside the gated-DeltaNet layers is the linear-attention core (chunked delta rule),
  compared with ``costmodel.inputs.models.linear_attention_flops_per_token``; ``aten.convolution`` and
  ``aten.convolution_backward`` are the depthwise causal conv1d of those layers. These rows are
  reported with their difference explained, not asserted equal (see the notes in the CSV).

The per-layer split uses the counter's module attribution at the level of decoder layers
(``<Model>.model.layers.<i>``); below that level the attribution of backward ops is not reliable.

Three more runs, each with its own rows:

- Packed batch (``run_packed``): one row of unequal documents (``PACKED_DOCUMENTS``, T = Σ sᵢ),
  ``position_ids`` restarting at 0 for each document, as transformers' packed training takes
  them. A custom attention implementation registered through ``transformers.AttentionInterface``
  (``VARLEN_ATTENTION``) finds the document starts in ``position_ids`` (as transformers'
  flash-attention varlen path builds its ``cu_seqlens``) and runs the model's own eager attention
  once per document with a causal mask: the math of a varlen kernel, done per document, so the
  counter sees ``3·4·Σsᵢ²·attention_dim·L_full`` = ``costmodel.derive.attention.
  sum_of_squares_flops``. The same row under plain eager (transformers builds a block-diagonal
  causal mask from ``position_ids``) multiplies the whole (Σ sᵢ)² square: what a kernel that is
  not varlen pays. ``flex_attention`` is no way to count the varlen case here: on CPU it has no
  backward, its eager forward under the counter fails (TypeError: no implementation for the
  higher-order op ``flex_attention``), and its FLOP formula ignores the block mask anyway (full
  square unless a compiled graph carries a sparsity hint). ``torch.nn.attention.varlen.
  varlen_attn``, whose formula sums per document, calls ``aten._flash_attention_forward``: CUDA
  only.
- SDPA (``run_sdpa``): ``attn_implementation="sdpa"`` on CPU dispatches to
  ``aten._scaled_dot_product_flash_attention_for_cpu`` and its ``_backward``, which have no entry
  in torch's FLOP registry (the flash/efficient/cuDNN SDPA ops there are CUDA-only: they do not
  run on CPU tensors), so the stock counter counts 0 for the attention. Binding torch's own SDPA
  formulas (``sdpa_flop_count``: 2 GEMMs forward; ``sdpa_backward_flop_count``: 5 GEMMs backward,
  QKᵀ recomputed) to the two CPU ops through ``custom_mapping`` makes the counter see the flash
  kernel the model runs; that count is compared with costmodel's ``flash`` convention (3.5x,
  full square: torch's formula ignores ``is_causal``). Under ``sdpa_kernel(SDPBackend.MATH)``
  the composite math path decomposes into ``bmm`` and counts like eager (course, 3x).
- MTP (``run_mtp``): ``DeepseekV3ForCausalLM`` built from a config has no MTP layer (a checkpoint's
  ``model.layers.61.*`` is in ``_keys_to_ignore_on_load_unexpected``); transformers builds it
  apart, as ``transformers.modeling_layers.MtpModel(main_model, num_mtp_layers)`` (for
  ``generate(use_mtp=True)``). Its ``forward`` with labels fails in 5.24 (``loss = None`` then
  ``loss +=``), so the step drives each depth through ``MtpModel.forward_layer``: main model on
  tokens[0:s], MTP depth 1 on the embeddings of tokens[1:s+1] and the main hidden states,
  predicting tokens[2:s+2]. Compared with N + ``mtp_activated_params`` (scenario key ``count_mtp``) and one
  more full-attention layer per MTP layer. qwen3_next and qwen3_5_moe build no MTP layer: their
  configs have no ``num_mtp_layers`` (``get_mtp_config`` raises) and their models only ignore the
  checkpoint's ``^mtp.*`` keys.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from dataclasses import dataclass

from costmodel.inputs.assumptions import assumed
from costmodel.inputs.models import (
    linear_attention_conv_flops_per_token,
    linear_attention_flops_per_token,
    shape_from_config,
)

CSV_FIELDS = ("model", "term", "batch", "seq_len", "predicted", "counted", "difference", "note")

_COMMON = {
    "hidden_size": 64,
    "vocab_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "tie_word_embeddings": False,
}

# name -> (config dict as in a config.json, batch size, sequence length)
TINY_MODELS: dict[str, tuple[dict, int, int]] = {
    "llama-gqa": (
        {"model_type": "llama", "num_hidden_layers": 2, "intermediate_size": 128, **_COMMON},
        2,
        32,
    ),
    "qwen3-moe": (
        {
            "model_type": "qwen3_moe",
            "num_hidden_layers": 2,
            "head_dim": 32,  # attention_dim 128 = 2 x hidden_size
            "intermediate_size": 96,
            "moe_intermediate_size": 32,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "mlp_only_layers": [0],
            **_COMMON,
        },
        2,
        32,
    ),
    "deepseek-v3-mla": (
        {
            "model_type": "deepseek_v3",
            "num_hidden_layers": 2,
            "intermediate_size": 96,
            "moe_intermediate_size": 32,
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "n_shared_experts": 1,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
            "q_lora_rank": 32,
            "kv_lora_rank": 16,
            "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 8,
            "v_head_dim": 16,
            **{**_COMMON, "num_key_value_heads": 4},
        },
        2,
        32,
    ),
    "qwen3.5-moe-hybrid": (
        {
            "model_type": "qwen3_5_moe",
            "tie_word_embeddings": False,
            "text_config": {
                "model_type": "qwen3_5_moe_text",
                "num_hidden_layers": 4,
                "layer_types": ["linear_attention"] * 3 + ["full_attention"],
                "head_dim": 32,
                "attn_output_gate": True,
                "moe_intermediate_size": 32,
                "shared_expert_intermediate_size": 32,
                "num_experts": 8,
                "num_experts_per_tok": 2,
                "linear_num_key_heads": 2,
                "linear_num_value_heads": 4,
                "linear_key_head_dim": 16,
                "linear_value_head_dim": 16,
                "linear_conv_kernel_dim": 4,
                **_COMMON,
            },
        },
        2,
        128,  # two chunks of 64
    ),
}

#: The chunk size of transformers' torch_chunk_gated_delta_rule: the assumption's.
CHUNK_SIZE = assumed("linear_attention_chunk")

#: The packed batch: one row of unequal documents, run on this tiny model's config.
PACKED_MODEL = "llama-gqa"
PACKED_DOCUMENTS = (40, 16, 8)  # T = 64 tokens in one row

#: The name under which the per-document attention is registered in transformers'
#: AttentionInterface (the mask interface does not know it: the model passes no mask to it).
VARLEN_ATTENTION = "costmodel_varlen_eager"

#: The SDPA run: this tiny model's config and batch, ``attn_implementation="sdpa"``.
SDPA_MODEL = "llama-gqa"

#: name -> (config dict with one MTP layer, batch size, sequence length)
MTP_MODELS: dict[str, tuple[dict, int, int]] = {
    "deepseek-v3-mla-mtp": (
        {**TINY_MODELS["deepseek-v3-mla"][0], "num_nextn_predict_layers": 1},
        2,
        32,
    ),
}
MTP_LOSS_WEIGHT = 0.3  # DeepSeek-V3's lambda; a scalar on the loss: no FLOPs

NOTE_MATMUL = (
    "aten.mm/addmm over the whole step = 6*N*T; N excludes the input embedding (a gather: "
    "0 FLOPs forward and backward)"
)
NOTE_ATTENTION = (
    "aten.bmm in full-attention layers (QK^T and AV, full s*s square) = 3*4*s^2*attention_dim*"
    "L_full*B; softmax, causal mask, scaling, RoPE are elementwise: not counted"
)
NOTE_LINEAR_FWD = (
    "forward only; counter has no formula for linalg.solve_triangular, so the difference is "
    "exactly costmodel's two unit-triangular solves H*(C-1)*(dk+dv)*T*L_linear"
)
NOTE_LINEAR_TRAIN = (
    "fwd+bwd; costmodel takes 3x forward; the counter's backward is not 2x forward: each "
    "solve_triangular backward adds a bmm (grad of the CxC system); the zero initial state "
    "needs no grad (1 bmm instead of 2 for the first chunk's state reads); the last chunk's "
    "state update is unused (no backward)"
)
NOTE_CONV = (
    "depthwise causal conv1d (its weights are not in N); the counter runs it on s+K-1 padded "
    "positions and its convolution_backward formula ignores groups (grad input counted x channels)"
)
NOTE_TOTAL = (
    "everything counted vs the sum of the terms above; norms, softmax, RoPE, SiLU/gates, "
    "residual adds, top-k routing and the loss are elementwise/reductions: no FLOP formula"
)
NOTE_PACKED_MATMUL = (
    "one packed row of documents 40+16+8, T = sum of the lengths = 64; aten.mm/addmm = 6*N*T "
    "(run with the per-document attention)"
)
NOTE_VARLEN = (
    "aten.bmm in full-attention layers, attention split per document: a custom attn_implementation "
    "(transformers AttentionInterface) finds the document starts in position_ids as transformers' "
    "flash varlen path does (cu_seqlens) and runs the model's eager attention per document with a "
    "causal mask = sum_of_squares_flops: 3*4*sum(s_i^2)*attention_dim*L_full (course, full square "
    "per document)"
)
NOTE_BLOCK_DIAGONAL = (
    "the same packed row under plain eager: transformers builds a block-diagonal causal mask from "
    "position_ids but QK^T and AV multiply the whole (sum s_i)^2 square = 3*4*(sum s_i)^2*"
    "attention_dim*L_full*1, 64^2/(40^2+16^2+8^2) = 2.13x the varlen term; a kernel that is not "
    "varlen pays this"
)
NOTE_PACKED_TOTAL = (
    "everything counted in the per-document run vs matmul_6ND + attention_core_varlen"
)
NOTE_SDPA_MATMUL = "attn_implementation=sdpa on CPU; aten.mm/addmm = 6*N*T as with eager"
NOTE_SDPA_STOCK = (
    "stock FlopCounterMode: CPU SDPA runs aten._scaled_dot_product_flash_attention_for_cpu and "
    "its _backward, absent from torch's flop_registry and not decomposable: 0 counted; the ops "
    "with a formula (_scaled_dot_product_flash/efficient/cudnn_attention, _flash/"
    "_efficient_attention_forward) have no CPU kernel; predicted = costmodel's flash convention"
)
NOTE_FLASH = (
    "counter with torch's own SDPA formulas bound (custom_mapping) to the CPU flash ops the model "
    "runs: forward 2 GEMMs, backward 5 (QK^T recomputed) = 3.5*4*s^2*attention_dim*L_full*B = "
    "costmodel flash convention, full square: torch ignores is_causal (transformers passes "
    "is_causal=True), so not flash_causal"
)
NOTE_SDPA_MATH = (
    "sdpa_kernel(SDPBackend.MATH): the composite math path decomposes into aten.bmm, full square, "
    "backward 2x forward = course convention (3x), 6/7 of the flash count"
)
NOTE_SDPA_TOTAL = "everything counted in the flash-formula run vs matmul_6ND + attention_core_flash"
NOTE_MTP_MATMUL = (
    "main model + 1 MTP depth (transformers.modeling_layers.MtpModel.forward_layer): aten.mm/addmm "
    "= 6*(N + N_mtp)*T; N_mtp = mtp_activated_params (scenario key count_mtp): eh_proj 2h->h, the "
    "MTP layer's attention and MoE (router, k experts, shared expert), the shared head again"
)
NOTE_MTP_ATTENTION = (
    "aten.bmm of the step: the main model's full-attention layers and the MTP layer's (one each) "
    "= 3*4*s^2*attention_dim*(L_full + L_mtp)*B"
)


def attention_training_flops(
    seq_len: int,
    attention_dim: int,
    num_full_layers: int,
    num_sequences: int,
    convention: str = "course",
) -> int:
    """Forward+backward FLOPs of the full-attention core (QKᵀ and AV), from costmodel.derive.
    attention's derivation; the course convention (default) is the full square, no causal
    halving: ``3 · 4 · s² · attention_dim · L_full · B``; ``flash`` is 3.5x instead of 3x."""
    from costmodel.derive import attention

    return int(
        attention.attention_training_flops(
            seq_len, attention_dim, num_full_layers, num_sequences, convention=convention
        )
    )


def varlen_attention_training_flops(
    lengths, attention_dim: int, num_full_layers: int, convention: str = "course"
) -> int:
    """Attention-core FLOPs of documents of the given lengths, each attending only to itself
    (varlen): proportional to Σ sᵢ², ``costmodel.derive.attention.sum_of_squares_flops``."""
    from costmodel.derive import attention

    return int(attention.sum_of_squares_flops(lengths, attention_dim, num_full_layers, convention))


def matmul_training_flops(n_params: int, tokens: int) -> int:
    """6·N·D from costmodel.derive.flops (the derived forward 2ND + backward 4ND)."""
    from costmodel.derive import flops

    return int(flops.training_matmul_flops(n_params, tokens))


@dataclass(frozen=True)
class Row:
    model: str
    term: str
    batch: int
    seq_len: int
    predicted: int
    counted: int
    note: str

    @property
    def difference(self) -> int:
        return self.counted - self.predicted

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "term": self.term,
            "batch": self.batch,
            "seq_len": self.seq_len,
            "predicted": self.predicted,
            "counted": self.counted,
            "difference": self.difference,
            "note": self.note,
        }


def _import_torch():
    try:
        import torch
        import transformers
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "costmodel.validate needs torch and transformers: pip install -r validate-requirements.txt"
        ) from exc
    transformers.logging.set_verbosity_error()
    return torch, transformers, FlopCounterMode


def _varlen_eager_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs
):
    """Attention of one packed row, document by document (what a varlen kernel computes).

    Called by the model's attention layer in place of eager/sdpa (registered as
    ``VARLEN_ATTENTION``); ``query`` is (1, heads, T, head_dim), ``key``/``value`` (1, kv_heads, T,
    ...). The documents start where ``position_ids`` is at its minimum (transformers'
    ``prepare_fa_kwargs_from_position_ids``, the ``cu_seqlens`` of its flash varlen path); each
    runs through the model's own ``eager_attention_forward`` with a causal mask of its own
    length, so the attention GEMMs are sᵢ x sᵢ, never the (Σ sᵢ)² square."""
    torch, _, _ = _import_torch()
    from transformers.modeling_flash_attention_utils import prepare_fa_kwargs_from_position_ids

    position_ids = kwargs.get("position_ids")
    if position_ids is None or query.shape[0] != 1:
        raise ValueError(f"{VARLEN_ATTENTION} needs one packed row and its position_ids")
    (cu_seqlens, _), _ = prepare_fa_kwargs_from_position_ids(position_ids)
    eager = sys.modules[type(module).__module__].eager_attention_forward
    bounds = cu_seqlens.tolist()
    outputs = []
    for start, end in zip(bounds[:-1], bounds[1:]):
        n = end - start
        causal = torch.full(
            (n, n), torch.finfo(query.dtype).min, dtype=query.dtype, device=query.device
        ).triu(1)
        out, _ = eager(
            module,
            query[:, :, start:end],
            key[:, :, start:end],
            value[:, :, start:end],
            causal[None, None],
            scaling=scaling,
            dropout=dropout,
        )
        outputs.append(out)  # (1, n, heads, head_dim)
    return torch.cat(outputs, dim=1), None


def _build(cfg: dict, attn_implementation: str = "eager"):
    torch, transformers, _ = _import_torch()
    if attn_implementation == VARLEN_ATTENTION:
        transformers.AttentionInterface.register(VARLEN_ATTENTION, _varlen_eager_attention)
    model_type = cfg["model_type"]
    config = transformers.CONFIG_MAPPING[model_type](
        **{k: v for k, v in cfg.items() if k != "model_type"}
    )
    if (
        hasattr(config, "text_config")
        and config.text_config is not None
        and model_type == "qwen3_5_moe"
    ):
        config = config.text_config  # the language model alone: no vision tower
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation=attn_implementation, experts_implementation="eager"
    )
    model.train()
    return model


def _op_counts(counts: dict) -> dict[str, int]:
    return {str(op).removeprefix("aten.").split(".")[0]: int(n) for op, n in counts.items()}


def _layer_counts(all_counts: dict, model, num_layers: int) -> list[dict[str, int]]:
    prefix = f"{type(model).__name__}.model.layers."
    return [_op_counts(all_counts.get(f"{prefix}{i}", {})) for i in range(num_layers)]


def run_model(name: str) -> list[Row]:
    """One training step of tiny model ``name`` under FlopCounterMode; the rows for the CSV."""
    torch, _, FlopCounterMode = _import_torch()
    cfg, batch, seq_len = TINY_MODELS[name]
    shape = shape_from_config(cfg, name=name)
    model = _build(cfg)
    vocab = shape.vocab_size
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq_len), generator=generator)
    tokens = batch * seq_len

    def loss_of(logits):
        return torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab), ids.reshape(-1))

    counter = FlopCounterMode(display=False, depth=None)
    with counter:
        loss = loss_of(model(input_ids=ids).logits)
        loss.backward()
    flops = counter.get_flop_counts()
    total = _op_counts(flops["Global"])
    layers = _layer_counts(flops, model, shape.num_layers)
    full = [i for i, t in enumerate(shape.layer_types) if t == "full_attention"]
    linear = [i for i, t in enumerate(shape.layer_types) if t == "linear_attention"]

    rows = []
    pred_matmul = matmul_training_flops(shape.activated_params, tokens)
    rows.append(
        Row(
            name,
            "matmul_6ND",
            batch,
            seq_len,
            pred_matmul,
            total.get("mm", 0) + total.get("addmm", 0),
            NOTE_MATMUL,
        )
    )
    pred_attention = attention_training_flops(seq_len, shape.attention_dim, len(full), batch)
    rows.append(
        Row(
            name,
            "attention_core",
            batch,
            seq_len,
            pred_attention,
            sum(layers[i].get("bmm", 0) for i in full),
            NOTE_ATTENTION,
        )
    )
    predicted_total = pred_matmul + pred_attention
    if linear:
        per_token = linear_attention_flops_per_token(shape, CHUNK_SIZE)
        fwd_counter = FlopCounterMode(display=False, depth=None)
        with torch.no_grad(), fwd_counter:
            model(input_ids=ids)
        fwd_layers = _layer_counts(fwd_counter.get_flop_counts(), model, shape.num_layers)
        rows.append(
            Row(
                name,
                "linear_attention_core_forward",
                batch,
                seq_len,
                per_token * tokens * len(linear),
                sum(fwd_layers[i].get("bmm", 0) for i in linear),
                NOTE_LINEAR_FWD,
            )
        )
        pred_linear = 3 * per_token * tokens * len(linear)
        rows.append(
            Row(
                name,
                "linear_attention_core",
                batch,
                seq_len,
                pred_linear,
                sum(layers[i].get("bmm", 0) for i in linear),
                NOTE_LINEAR_TRAIN,
            )
        )
        pred_conv = 3 * linear_attention_conv_flops_per_token(shape) * tokens * len(linear)
        rows.append(
            Row(
                name,
                "linear_attention_conv",
                batch,
                seq_len,
                pred_conv,
                sum(
                    layers[i].get("convolution", 0) + layers[i].get("convolution_backward", 0)
                    for i in linear
                ),
                NOTE_CONV,
            )
        )
        predicted_total += pred_linear + pred_conv
    rows.append(
        Row(name, "total", batch, seq_len, predicted_total, sum(total.values()), NOTE_TOTAL)
    )
    return rows


def _step_counts(model, ids, vocab: int, custom_mapping=None, backend=None, **forward_kwargs):
    """One training step (forward, cross-entropy on the logits, backward) under FlopCounterMode,
    optionally with extra FLOP formulas (``custom_mapping``) and an SDPA backend forced."""
    torch, _, FlopCounterMode = _import_torch()
    from contextlib import nullcontext

    if backend is None:
        chosen = nullcontext()
    else:
        from torch.nn.attention import sdpa_kernel

        chosen = sdpa_kernel(backend)
    counter = FlopCounterMode(display=False, depth=None, custom_mapping=custom_mapping)
    with chosen, counter:
        logits = model(input_ids=ids, **forward_kwargs).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab), ids.reshape(-1))
        loss.backward()
    return counter.get_flop_counts()


def _packed_inputs(vocab: int):
    """One row of the documents of ``PACKED_DOCUMENTS``: token ids and position ids that restart
    at 0 for each document."""
    torch, _, _ = _import_torch()
    tokens = sum(PACKED_DOCUMENTS)
    ids = torch.randint(0, vocab, (1, tokens), generator=torch.Generator().manual_seed(1))
    position_ids = torch.cat([torch.arange(n) for n in PACKED_DOCUMENTS])[None]
    return ids, position_ids


def packed_logits(attn_implementation: str, packed: bool = True):
    """Logits of the packed row (forward only) under ``attn_implementation``; ``packed=False``
    drops the position ids, so the row is one causal sequence (for the tests: the per-document
    attention must give the block-diagonal eager result, and that must differ from this)."""
    torch, _, _ = _import_torch()
    cfg, _, _ = TINY_MODELS[PACKED_MODEL]
    model = _build(cfg, attn_implementation)
    ids, position_ids = _packed_inputs(shape_from_config(cfg).vocab_size)
    extra = {"position_ids": position_ids} if packed else {}
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False, **extra).logits


def run_packed() -> list[Row]:
    """One packed row of unequal documents: per-document (varlen) attention vs the block-diagonal
    mask over the whole row."""
    cfg, _, _ = TINY_MODELS[PACKED_MODEL]
    name = f"{PACKED_MODEL}-packed"
    shape = shape_from_config(cfg, name=name)
    ids, position_ids = _packed_inputs(shape.vocab_size)
    tokens = sum(PACKED_DOCUMENTS)
    full = [i for i, t in enumerate(shape.layer_types) if t == "full_attention"]
    counted = {}
    for implementation in (VARLEN_ATTENTION, "eager"):
        model = _build(cfg, implementation)
        flops = _step_counts(
            model, ids, shape.vocab_size, position_ids=position_ids, use_cache=False
        )
        layers = _layer_counts(flops, model, shape.num_layers)
        counted[implementation] = (
            _op_counts(flops["Global"]),
            sum(layers[i].get("bmm", 0) for i in full),
        )
    total, varlen_bmm = counted[VARLEN_ATTENTION]
    pred_matmul = matmul_training_flops(shape.activated_params, tokens)
    pred_varlen = varlen_attention_training_flops(PACKED_DOCUMENTS, shape.attention_dim, len(full))
    pred_square = attention_training_flops(tokens, shape.attention_dim, len(full), 1)
    return [
        Row(
            name,
            "matmul_6ND",
            1,
            tokens,
            pred_matmul,
            total.get("mm", 0) + total.get("addmm", 0),
            NOTE_PACKED_MATMUL,
        ),
        Row(name, "attention_core_varlen", 1, tokens, pred_varlen, varlen_bmm, NOTE_VARLEN),
        Row(
            name,
            "attention_core_block_diagonal",
            1,
            tokens,
            pred_square,
            counted["eager"][1],
            NOTE_BLOCK_DIAGONAL,
        ),
        Row(
            name,
            "total",
            1,
            tokens,
            pred_matmul + pred_varlen,
            sum(total.values()),
            NOTE_PACKED_TOTAL,
        ),
    ]


def _cpu_flash_forward_flops(query, key, value, *args, out_shape=None, **kwargs) -> int:
    """torch's own SDPA forward formula, for aten._scaled_dot_product_flash_attention_for_cpu."""
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(query, key, value)


def _cpu_flash_backward_flops(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    """torch's own SDPA backward formula, for ..._flash_attention_for_cpu_backward."""
    from torch.utils.flop_counter import sdpa_backward_flop_count

    return sdpa_backward_flop_count(grad_out, query, key, value)


def cpu_flash_mapping() -> dict:
    """``custom_mapping`` for FlopCounterMode: the CPU flash-attention ops -> torch's SDPA
    formulas (the counter applies its shape wrapper: the functions receive shapes)."""
    torch, _, _ = _import_torch()
    aten = torch.ops.aten
    return {
        aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_forward_flops,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward_flops,
    }


def run_sdpa() -> list[Row]:
    """``attn_implementation="sdpa"`` on CPU: stock counter (blind to the CPU flash ops), the
    counter with torch's SDPA formulas bound to them (flash convention), and the math backend."""
    torch, _, _ = _import_torch()
    from torch.nn.attention import SDPBackend

    cfg, batch, seq_len = TINY_MODELS[SDPA_MODEL]
    name = f"{SDPA_MODEL}-sdpa"
    shape = shape_from_config(cfg, name=name)
    model = _build(cfg, "sdpa")
    ids = torch.randint(
        0, shape.vocab_size, (batch, seq_len), generator=torch.Generator().manual_seed(1)
    )
    tokens = batch * seq_len
    full = [i for i, t in enumerate(shape.layer_types) if t == "full_attention"]

    def attention_ops(flops) -> int:
        """Everything counted in the full-attention layers except the weight matmuls."""
        layers = _layer_counts(flops, model, shape.num_layers)
        return sum(n for i in full for op, n in layers[i].items() if op not in ("mm", "addmm"))

    stock = _step_counts(model, ids, shape.vocab_size)
    mapped = _step_counts(model, ids, shape.vocab_size, custom_mapping=cpu_flash_mapping())
    math = _step_counts(model, ids, shape.vocab_size, backend=SDPBackend.MATH)
    total = _op_counts(mapped["Global"])
    stock_total = _op_counts(stock.get("Global", {}))
    pred_matmul = matmul_training_flops(shape.activated_params, tokens)
    pred_flash = attention_training_flops(
        seq_len, shape.attention_dim, len(full), batch, convention="flash"
    )
    pred_course = attention_training_flops(seq_len, shape.attention_dim, len(full), batch)
    return [
        Row(
            name,
            "matmul_6ND",
            batch,
            seq_len,
            pred_matmul,
            stock_total.get("mm", 0) + stock_total.get("addmm", 0),
            NOTE_SDPA_MATMUL,
        ),
        Row(
            name,
            "attention_core_sdpa_cpu_stock",
            batch,
            seq_len,
            pred_flash,
            attention_ops(stock),
            NOTE_SDPA_STOCK,
        ),
        Row(
            name,
            "attention_core_flash",
            batch,
            seq_len,
            pred_flash,
            attention_ops(mapped),
            NOTE_FLASH,
        ),
        Row(
            name,
            "attention_core_sdpa_math",
            batch,
            seq_len,
            pred_course,
            attention_ops(math),
            NOTE_SDPA_MATH,
        ),
        Row(
            name,
            "total",
            batch,
            seq_len,
            pred_matmul + pred_flash,
            sum(total.values()),
            NOTE_SDPA_TOTAL,
        ),
    ]


def run_mtp(name: str) -> list[Row]:
    """One training step of the main model and its MTP depths (transformers' ``MtpModel``)."""
    torch, _, FlopCounterMode = _import_torch()
    from transformers.modeling_layers import MtpModel

    cfg, batch, seq_len = MTP_MODELS[name]
    shape = shape_from_config(cfg, name=name)
    model = _build(cfg)
    torch.manual_seed(2)
    mtp = MtpModel(model, shape.num_mtp_layers)
    mtp.train()
    vocab = shape.vocab_size
    # s + 1 + depths tokens: the main model reads [0, s) and predicts [1, s + 1); MTP depth k
    # (from 1) reads the embeddings of [k, s + k) with the hidden states of depth k - 1 (the main
    # model for k = 1) and predicts [k + 1, s + k + 1), as in DeepSeek-V3's sequential MTP
    stream = torch.randint(
        0,
        vocab,
        (batch, seq_len + 1 + shape.num_mtp_layers),
        generator=torch.Generator().manual_seed(1),
    )
    positions = torch.arange(1, seq_len + 1)[None].expand(batch, -1)
    tokens = batch * seq_len

    def cross_entropy(logits, targets):
        return torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, vocab), targets.reshape(-1)
        )

    counter = FlopCounterMode(display=False, depth=None)
    with counter:
        hidden = model.model(input_ids=stream[:, :seq_len], use_cache=False).last_hidden_state
        loss = cross_entropy(model.lm_head(hidden), stream[:, 1 : seq_len + 1])
        for depth in range(shape.num_mtp_layers):
            hidden = mtp.forward_layer(
                depth,
                hidden,
                positions + depth,
                None,
                input_ids=stream[:, 1 + depth : 1 + depth + seq_len],
            )
            targets = stream[:, 2 + depth : 2 + depth + seq_len]
            loss = loss + MTP_LOSS_WEIGHT * cross_entropy(mtp._project_to_logits(hidden), targets)
        loss.backward()
    total = _op_counts(counter.get_flop_counts()["Global"])
    n_full = shape.num_full_attention_layers + shape.num_mtp_layers
    pred_matmul = matmul_training_flops(shape.activated_params + shape.mtp_activated_params, tokens)
    pred_attention = attention_training_flops(seq_len, shape.attention_dim, n_full, batch)
    return [
        Row(
            name,
            "matmul_6ND",
            batch,
            seq_len,
            pred_matmul,
            total.get("mm", 0) + total.get("addmm", 0),
            NOTE_MTP_MATMUL,
        ),
        Row(
            name,
            "attention_core",
            batch,
            seq_len,
            pred_attention,
            total.get("bmm", 0),
            NOTE_MTP_ATTENTION,
        ),
        Row(
            name,
            "total",
            batch,
            seq_len,
            pred_matmul + pred_attention,
            sum(total.values()),
            NOTE_TOTAL,
        ),
    ]


def validation_rows() -> list[Row]:
    """All rows, in a fixed order."""
    rows: list[Row] = []
    for name in TINY_MODELS:
        rows.extend(run_model(name))
    rows.extend(run_packed())
    rows.extend(run_sdpa())
    for name in MTP_MODELS:
        rows.extend(run_mtp(name))
    return rows


def csv_text(rows: list, fields: tuple | list) -> str:
    """Rows (each with as_dict()) as CSV text with the given columns."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row.as_dict())
    return buffer.getvalue()


def rows_to_csv(rows: list[Row]) -> str:
    return csv_text(rows, CSV_FIELDS)


def command(prog: str, description: str, make_rows, to_csv, argv: list[str] | None) -> int:
    """The command line of a cross-check: build the rows, write their CSV to --out (atomically:
    a temporary file beside it, then a rename) or to standard output."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--out", help="write the CSV here (default: standard output)")
    args = parser.parse_args(argv)
    try:
        text = to_csv(make_rows())
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.out:
        sys.stdout.write(text)
        return 0
    import os
    import tempfile
    from pathlib import Path

    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return 0


def main(argv: list[str] | None = None) -> int:
    return command(
        "python -m costmodel.validate",
        "Compare costmodel's FLOP terms with torch's FlopCounterMode on tiny models.",
        validation_rows,
        rows_to_csv,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
