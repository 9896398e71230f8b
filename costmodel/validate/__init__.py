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
  compared with ``costmodel.evaluate.simulate.linear.linear_attention_flops_per_token``; ``aten.convolution`` and
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

The package's modules: ``flop_models`` (the tiny models, the notes, the predictions, ``Row``),
``flop_torch`` (building the models, the varlen attention, one counted step), ``flop_runs`` (the
runs and their rows), ``command`` (the command line both cross-checks share) and
``saved_storages`` (the measurement of ``python -m costmodel.validate_memory``).
"""

from __future__ import annotations

from costmodel.validate.command import command, csv_text
from costmodel.validate.flop_models import (
    CHUNK_SIZE,
    COMMON,
    CSV_FIELDS,
    MTP_LOSS_WEIGHT,
    MTP_MODELS,
    NOTE_ATTENTION,
    NOTE_BLOCK_DIAGONAL,
    NOTE_CONV,
    NOTE_FLASH,
    NOTE_LINEAR_FWD,
    NOTE_LINEAR_TRAIN,
    NOTE_MATMUL,
    NOTE_MTP_ATTENTION,
    NOTE_MTP_MATMUL,
    NOTE_PACKED_MATMUL,
    NOTE_PACKED_TOTAL,
    NOTE_SDPA_MATH,
    NOTE_SDPA_MATMUL,
    NOTE_SDPA_STOCK,
    NOTE_SDPA_TOTAL,
    NOTE_TOTAL,
    NOTE_VARLEN,
    PACKED_DOCUMENTS,
    PACKED_MODEL,
    SDPA_MODEL,
    TINY_MODELS,
    VARLEN_ATTENTION,
    Row,
    attention_training_flops,
    matmul_training_flops,
    varlen_attention_training_flops,
)
from costmodel.validate.flop_runs import run_model, run_mtp, run_packed, run_sdpa
from costmodel.validate.flop_torch import build_model, cpu_flash_mapping, packed_logits

#: The names the cross-checks and their tests read here (``COMMON`` and ``build_model`` too).
__all__ = [
    "COMMON",
    "build_model",
    "CSV_FIELDS",
    "TINY_MODELS",
    "CHUNK_SIZE",
    "PACKED_MODEL",
    "PACKED_DOCUMENTS",
    "VARLEN_ATTENTION",
    "SDPA_MODEL",
    "MTP_MODELS",
    "MTP_LOSS_WEIGHT",
    "NOTE_MATMUL",
    "NOTE_ATTENTION",
    "NOTE_LINEAR_FWD",
    "NOTE_LINEAR_TRAIN",
    "NOTE_CONV",
    "NOTE_TOTAL",
    "NOTE_PACKED_MATMUL",
    "NOTE_VARLEN",
    "NOTE_BLOCK_DIAGONAL",
    "NOTE_PACKED_TOTAL",
    "NOTE_SDPA_MATMUL",
    "NOTE_SDPA_STOCK",
    "NOTE_FLASH",
    "NOTE_SDPA_MATH",
    "NOTE_SDPA_TOTAL",
    "NOTE_MTP_MATMUL",
    "NOTE_MTP_ATTENTION",
    "attention_training_flops",
    "varlen_attention_training_flops",
    "matmul_training_flops",
    "Row",
    "command",
    "csv_text",
    "run_model",
    "run_mtp",
    "run_packed",
    "run_sdpa",
    "cpu_flash_mapping",
    "packed_logits",
    "validation_rows",
    "rows_to_csv",
    "main",
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


def rows_to_csv(rows: list[Row]) -> str:
    return csv_text(rows, CSV_FIELDS)


def main(argv: list[str] | None = None) -> int:
    return command(
        "python -m costmodel.validate",
        "Compare costmodel's FLOP terms with torch's FlopCounterMode on tiny models.",
        validation_rows,
        rows_to_csv,
        argv,
    )
