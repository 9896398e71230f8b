"""The FLOP cross-check's torch side: the tiny models built with transformers, the per-document
(varlen) attention of a packed row, one training step under ``FlopCounterMode``, and torch's
SDPA formulas bound to the CPU flash-attention ops."""

from __future__ import annotations

import sys

from costmodel.inputs.models import shape_from_config
from costmodel.validate.flop_models import (
    PACKED_DOCUMENTS,
    PACKED_MODEL,
    TINY_MODELS,
    VARLEN_ATTENTION,
)


def import_torch():
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
    torch, _, _ = import_torch()
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


def build_model(cfg: dict, attn_implementation: str = "eager"):
    torch, transformers, _ = import_torch()
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


def op_counts(counts: dict) -> dict[str, int]:
    return {str(op).removeprefix("aten.").split(".")[0]: int(n) for op, n in counts.items()}


def layer_counts(all_counts: dict, model, num_layers: int) -> list[dict[str, int]]:
    prefix = f"{type(model).__name__}.model.layers."
    return [op_counts(all_counts.get(f"{prefix}{i}", {})) for i in range(num_layers)]


def step_counts(model, ids, vocab: int, custom_mapping=None, backend=None, **forward_kwargs):
    """One training step (forward, cross-entropy on the logits, backward) under FlopCounterMode,
    optionally with extra FLOP formulas (``custom_mapping``) and an SDPA backend forced."""
    torch, _, FlopCounterMode = import_torch()
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


def packed_inputs(vocab: int):
    """One row of the documents of ``PACKED_DOCUMENTS``: token ids and position ids that restart
    at 0 for each document."""
    torch, _, _ = import_torch()
    tokens = sum(PACKED_DOCUMENTS)
    ids = torch.randint(0, vocab, (1, tokens), generator=torch.Generator().manual_seed(1))
    position_ids = torch.cat([torch.arange(n) for n in PACKED_DOCUMENTS])[None]
    return ids, position_ids


def packed_logits(attn_implementation: str, packed: bool = True):
    """Logits of the packed row (forward only) under ``attn_implementation``; ``packed=False``
    drops the position ids, so the row is one causal sequence (for the tests: the per-document
    attention must give the block-diagonal eager result, and that must differ from this)."""
    torch, _, _ = import_torch()
    cfg, _, _ = TINY_MODELS[PACKED_MODEL]
    model = build_model(cfg, attn_implementation)
    ids, position_ids = packed_inputs(shape_from_config(cfg).vocab_size)
    extra = {"position_ids": position_ids} if packed else {}
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False, **extra).logits


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
    torch, _, _ = import_torch()
    aten = torch.ops.aten
    return {
        aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_forward_flops,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward_flops,
    }
