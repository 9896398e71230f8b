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
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from dataclasses import dataclass

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

CHUNK_SIZE = 64  # chunk size of transformers' torch_chunk_gated_delta_rule

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


def attention_training_flops(
    seq_len: int, attention_dim: int, num_full_layers: int, num_sequences: int
) -> int:
    """Forward+backward FLOPs of the full-attention core (QKᵀ and AV), full square, no causal
    halving: ``3 · 4 · s² · attention_dim · L_full · B``, from costmodel.derive.attention's derivation
    (course convention)."""
    from costmodel.derive import attention

    return int(
        attention.attention_training_flops(
            seq_len, attention_dim, num_full_layers, num_sequences, convention="course"
        )
    )


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


def _build(cfg: dict):
    torch, transformers, _ = _import_torch()
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
        config, attn_implementation="eager", experts_implementation="eager"
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


def validation_rows() -> list[Row]:
    """All rows, in a fixed order."""
    rows: list[Row] = []
    for name in TINY_MODELS:
        rows.extend(run_model(name))
    return rows


def rows_to_csv(rows: list[Row]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row.as_dict())
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m costmodel.validate",
        description="Compare costmodel's FLOP terms with torch's FlopCounterMode on tiny models.",
    )
    parser.add_argument("--out", help="write the CSV here (default: standard output)")
    args = parser.parse_args(argv)
    try:
        text = rows_to_csv(validation_rows())
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        from pathlib import Path

        path = Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
