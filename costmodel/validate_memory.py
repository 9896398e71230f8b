"""Measure the bytes a forward pass saves for backward and compare them with
``costmodel.derive.activations``: the ``huggingface`` convention (what transformers keeps).

Run ``python -m costmodel.validate_memory --out costmodel/course/saved_tensors.csv`` (needs the
pins in ``validate-requirements.txt``: torch and transformers; no network, no weights).

The models (``CONFIGS``): seven tiny, randomly initialised models of six families, each built in
BF16 on CPU from a config dict, with ``attn_implementation`` eager and sdpa and the eager
per-expert MoE loop (``experts_implementation="eager"``):

- ``llama-gqa``: Llama with GQA (the config of ``costmodel.validate``);
- ``qwen2-bias``: Qwen2, whose q/k/v projections have biases (a bias saves nothing more);
- ``qwen3-moe``: Qwen3-MoE, one dense and one MoE layer, QK-norm;
- ``mixtral``: Mixtral, every layer MoE, top-k weights renormalised and kept in fp32;
- ``deepseek-v3-mla``: DeepSeek-V3, MLA, one dense and one MoE layer with a shared expert and the
  fp32 router;
- ``qwen3-next-hybrid``: Qwen3-Next, three gated-DeltaNet layers and one full-attention layer
  (output gate, partial RoPE, QK-norm), MoE with a gated shared expert, RMSNorm scaled by
  1 + weight. Without the flash-linear-attention and causal-conv1d packages (none on CPU),
  transformers runs its PyTorch fallbacks ``causal_conv1d_fn`` and
  ``torch_chunk_gated_delta_rule``, which keep far more than the chunked kernel: the prediction
  uses ``linear_attention_kernel="torch"``, the rule of those fallbacks (the report's rule is
  the kernel's, ``fla``);
- ``phi3``: Phi-3, whose q/k/v and gate/up projections are fused into one matmul each; costmodel
  reads no phi3 config, so its shape is read as the Llama config with the same fields
  (``SHAPE_AS``): the fused outputs are views of one storage of the same bytes.

Per model, ``BATCH`` sequences at each length of ``SEQ_LENS``, two runs:

1. Plain (parts ``layer <kind>``, ``outside layers``, ``total``): one forward pass and the
   cross-entropy loss on fp32 logits run under ``torch.autograd.graph.saved_tensors_hooks``. The
   pack hook wraps every saved tensor in a small holder object; after the forward, the holders
   still alive are the tensors the autograd graph keeps (a tensor saved by a node that was then
   dropped, such as DeepSeek-V3's group top-k, whose result needs no gradient, is freed with its
   node and not counted). Each distinct storage (keyed on ``untyped_storage().data_ptr()``)
   counts once with its whole ``nbytes()``; parameter and buffer storages are left out.
2. Full recompute (parts ``checkpoint ...``): the same step with every decoder layer under
   ``torch.utils.checkpoint`` (non-reentrant; transformers' gradient checkpointing, as a
   training run with full recompute runs it), then the backward:

   - ``checkpoint kept: layer <kind>``, ``checkpoint kept: outside layers``: what the forward
     keeps, measured as above (the checkpoint saves each layer's positional input, the hidden
     states, through the hooks), plus the keyword arguments transformers passes to every layer,
     which the checkpoints hold by reference until their backward (RoPE's cos and sin, the
     position ids, eager attention's mask): each storage still alive after the forward. Predicted:
     ``recompute="full"`` per layer, ``model_activation_bytes(checkpointed=True)`` outside;
   - ``checkpoint recompute: layer <kind>``: the working set of one layer's backward. A
     ``TorchDispatchMode`` runs during the backward; a ``context_fn`` marks the recompute of
     each layer, and the storages the recompute's operations return (except the kept inputs)
     are followed by weak references. After the recompute (the first operation after it; a
     garbage collection first, so the recompute's aborted frames, which torch's early stop
     leaves in a reference cycle, are gone) the ones still alive are the tensors the
     recomputed layer saved, held until its backward frees them: the largest such set over the
     layers of the kind. Predicted: ``recompute="none"`` of one layer of the kind;
   - ``checkpoint backward peak``: the largest sum, over the operations of the layers'
     backward, of every saved storage alive (kept inputs not yet freed, the recomputed set, the
     outside tensors still held). Predicted: every layer's kept input, plus the largest
     working set, plus the outside terms that live until the embedding's backward (token ids,
     RoPE, the checkpoints' keyword arguments); the loss-phase terms (final norm, lm_head input,
     fp32 log-softmax) are freed before the layers' backward starts. It is an upper bound: at
     layer i's backward the inputs of the layers above are already freed.

Attribution: forward pre-hooks and hooks on the decoder layers (``model.model.layers[i]``) mark
the layer that is running when a tensor is saved. A storage saved only inside layer i belongs to
it; a storage saved in several layers, outside every layer (token ids, final norm, lm_head input,
the loss's log-softmax), or passed to the layers as a keyword argument (RoPE's cos and sin,
computed once by the model: with a single full-attention layer, only that layer saves them) is
"outside layers".

The prediction for each layer is ``layer_activation_bytes`` with what these models run:
``framework="huggingface"`` (``FRAMEWORKS["huggingface"]``, the rules the report uses for that
framework: Hugging Face's RMSNorm with its fp32 upcast, SwiGLU as separate ops, the per-expert
loop, eager attention's fp32 softmax, gated DeltaNet by its PyTorch fallback),
``attention_kernel`` ``eager`` for eager, and for sdpa what CPU SDPA dispatches to:
``_scaled_dot_product_flash_attention_for_cpu`` (``flash``) when the query/key and value head
widths agree, the composite math path in fp32 (``math``) when they differ (MLA). Outside the
layers: ``model_activation_bytes`` with ``output_logits=False`` (the BF16 logits are the
forward's output, not saved for backward).

The hooks and the measurement are in ``costmodel/validate/saved_storages.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from costmodel.derive.activations import layer_activation_bytes, model_activation_bytes
from costmodel.inputs import family_flags
from costmodel.inputs.assumptions import assumed
from costmodel.inputs.models import shape_from_config
from costmodel.inputs.shape import LINEAR_ATTENTION
from costmodel.validate import COMMON, TINY_MODELS, command, csv_text
from costmodel.validate.saved_storages import (
    OUTSIDE,
    checkpointed_bytes,
    import_torch,
    saved_bytes,
)

CSV_FIELDS = (
    "model",
    "attention",
    "part",
    "batch",
    "seq_len",
    "predicted",
    "measured",
    "ratio",
    "note",
)

#: name -> config dict as in a config.json
CONFIGS: dict[str, dict] = {
    "llama-gqa": TINY_MODELS["llama-gqa"][0],
    "qwen2-bias": {
        "model_type": "qwen2",
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        **COMMON,
    },
    "qwen3-moe": TINY_MODELS["qwen3-moe"][0],
    "mixtral": {
        "model_type": "mixtral",
        "num_hidden_layers": 2,
        "intermediate_size": 32,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        **COMMON,
    },
    "deepseek-v3-mla": TINY_MODELS["deepseek-v3-mla"][0],
    "qwen3-next-hybrid": {
        "model_type": "qwen3_next",
        "num_hidden_layers": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "head_dim": 32,
        "intermediate_size": 96,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 32,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "mlp_only_layers": [0],
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4,
        **COMMON,
    },
    "phi3": {
        "model_type": "phi3",
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "pad_token_id": 0,  # Phi-3's default (32000) is outside the tiny vocabulary
        **COMMON,
    },
}
#: Model types costmodel reads no config of, read as the type whose layers save the same tensors.
SHAPE_AS = {"phi3": "llama"}
MODELS = tuple(CONFIGS)
ATTENTIONS = ("eager", "sdpa")
SEQ_LENS = (32, 128)
BATCH = 2
TOLERANCE = 0.05  # |measured / predicted - 1| allowed per row
#: The chunk size of transformers' torch_chunk_gated_delta_rule: the assumption's.
CHUNK_SIZE = assumed("linear_attention_chunk")

TOTAL = "total"
KEPT = "checkpoint kept: "
RECOMPUTED = "checkpoint recompute: "
PEAK = "checkpoint backward peak"
#: model_activation_bytes terms that live until the embedding's backward (after the layers')
THROUGH_BACKWARD = ("embedding.", "rope.", "checkpoint.")

NOTE_LAYER = (
    "sum over the layers of this kind; predicted: layer_activation_bytes, elementwise=eager "
    "(HF RMSNorm fp32 upcast, SwiGLU as separate ops), attention_kernel={kernel}"
)
NOTE_LINEAR = ", linear_attention_kernel=torch (transformers' PyTorch fallbacks)"
NOTE_OUTSIDE = (
    "token ids (int64), RoPE cos/sin (shared by all layers), final norm, lm_head input, fp32 "
    "log-softmax of the loss; the BF16 logits are the output, not saved; measured also holds "
    "the loss's 4-byte fp32 total_weight scalar"
)
NOTE_TOTAL = "every saved storage of the forward and the loss, each once"
NOTE_KEPT_LAYER = (
    "every layer under torch.utils.checkpoint (non-reentrant): what the forward keeps per layer, "
    "the layer's input hidden states; predicted: layer_activation_bytes(recompute=full); layers {}"
)
NOTE_KEPT_OUTSIDE = (
    "under checkpoint: the outside terms as without it, plus the keyword arguments the "
    "checkpoints hold (position ids; eager: the b x 1 x s x s mask); predicted: "
    "model_activation_bytes(checkpointed=True)"
)
NOTE_KEPT_TOTAL = "under checkpoint: every storage kept at the end of the forward and the loss"
NOTE_RECOMPUTED = (
    "one layer's recompute during the backward: the storages its operations returned that are "
    "still alive after it (the tensors it saved), the largest over the layers of this kind; "
    "predicted: layer_activation_bytes(recompute=none) of one layer ({kernel}); layers {layers}"
)
NOTE_PEAK = (
    "largest sum of live saved storages during the layers' backward; predicted: every layer's "
    "kept input + the largest recomputed layer + token ids, RoPE and the checkpoints' keyword "
    "arguments (the loss-phase terms are freed before); an upper bound: at layer i the inputs "
    "of the layers above are freed"
)


@dataclass(frozen=True)
class Row:
    model: str
    attention: str
    part: str
    batch: int
    seq_len: int
    predicted: float
    measured: int
    note: str

    @property
    def ratio(self) -> float:
        return self.measured / self.predicted if self.predicted else float("nan")

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "attention": self.attention,
            "part": self.part,
            "batch": self.batch,
            "seq_len": self.seq_len,
            "predicted": round(self.predicted),
            "measured": self.measured,
            "ratio": f"{self.ratio:.4f}",
            "note": self.note,
        }


def _config(name: str) -> dict:
    return CONFIGS[name]


def model_shape(name: str):
    """costmodel's shape of tiny model ``name`` (``SHAPE_AS`` for a type it reads as another)."""
    cfg = _config(name)
    model_type = SHAPE_AS.get(cfg["model_type"], cfg["model_type"])
    return shape_from_config({**cfg, "model_type": model_type}, name=name)


def build(cfg: dict, attn_implementation: str):
    """The tiny model in BF16 (``dtype``: modules that transformers keeps in fp32, such as
    DeepSeek-V3's router weight, stay fp32), in training mode."""
    torch, transformers = import_torch()
    model_type = cfg["model_type"]
    config = transformers.CONFIG_MAPPING[model_type](
        **{k: v for k, v in cfg.items() if k != "model_type"}
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(
        config,
        attn_implementation=attn_implementation,
        experts_implementation="eager",
        dtype=torch.bfloat16,
    )
    model.train()
    return model


def _kernel(attention: str, qk_head_dim: int, v_head_dim: int) -> str:
    if attention == "eager":
        return "eager"
    return "flash" if qk_head_dim == v_head_dim else "math"


def _mixer(shape, layer: int) -> str:
    if shape.layer_types[layer] == LINEAR_ATTENTION:
        return "gated_deltanet"
    return "mla" if shape.mla else "attention"


def predicted_layer(
    shape, config, layer: int, seq_len: int, kernel: str, recompute: str = "none"
) -> dict[str, float]:
    """``layer_activation_bytes`` of decoder layer ``layer`` of the tiny model."""
    moe = shape.moe_layer_flags[layer]
    return layer_activation_bytes(
        _mixer(shape, layer),
        "moe" if moe else "dense",
        b=BATCH,
        s=seq_len,
        hidden=shape.hidden_size,
        heads=shape.num_heads,
        kv_heads=shape.num_kv_heads,
        head_dim=shape.qk_head_dim,
        v_head_dim=shape.v_head_dim,
        ffn=shape.intermediate_size,
        qk_norm=shape.qk_norm,
        q_lora_rank=shape.q_lora_rank,
        kv_lora_rank=shape.kv_lora_rank,
        experts=shape.num_experts,
        top_k=shape.experts_per_token,
        moe_ffn=shape.moe_intermediate_size,
        shared_ffn=shape.shared_expert_intermediate_size,
        router_fp32=shape.router_fp32,
        norm_topk=shape.norm_topk,
        routing_weights_fp32=shape.routing_weights_fp32,
        shared_gate=shape.shared_expert_gate,
        output_gate=shape.attention_output_gate,
        norm_offset=shape.rmsnorm_offset,
        fused_qkv=family_flags.fused_qkv(config.model_type),
        attention_output_copy=family_flags.sdpa_output_copy(config.model_type),
        linear_key_heads=shape.linear_num_key_heads,
        linear_value_heads=shape.linear_num_value_heads,
        linear_key_head_dim=shape.linear_key_head_dim,
        linear_value_head_dim=shape.linear_value_head_dim,
        chunk=CHUNK_SIZE,
        conv_kernel=shape.linear_conv_kernel_dim,
        attention_kernel=kernel,
        framework="huggingface",
        recompute=recompute,
        bytes_per_element=2,
    )


def _rope_width(shape, config) -> int:
    """The rotated width per head: the query/key head width times the partial-rotary factor
    (Qwen3-Next rotates a quarter); MLA rotates its qk_rope_head_dim."""
    if shape.mla:
        return shape.qk_rope_head_dim
    rope = getattr(config, "rope_parameters", None) or {}
    factor = rope.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0))
    return int(shape.qk_head_dim * (factor or 1.0))


def predicted_outside(
    shape, config, seq_len: int, kernel: str = "flash", checkpointed: bool = False
) -> dict[str, float]:
    return model_activation_bytes(
        b=BATCH,
        s=seq_len,
        hidden=shape.hidden_size,
        vocab=shape.vocab_size,
        rope_head_dim=_rope_width(shape, config),
        elementwise="eager",
        norm_offset=shape.rmsnorm_offset,
        loss_fp32=True,
        output_logits=False,
        checkpointed=checkpointed,
        attention_kernel=kernel,
        bytes_per_element=2,
    )


def _layer_kind(shape, layer: int) -> str:
    return f"{_mixer(shape, layer)}+{'moe' if shape.moe_layer_flags[layer] else 'dense'}"


def _kinds(shape) -> dict[str, list[int]]:
    kinds: dict[str, list[int]] = {}
    for i in range(shape.num_layers):
        kinds.setdefault(_layer_kind(shape, i), []).append(i)
    return kinds


def _layer_note(shape, kernel: str, layers: list[int]) -> str:
    linear = NOTE_LINEAR if shape.layer_types[layers[0]] == LINEAR_ATTENTION else ""
    return NOTE_LAYER.format(kernel=kernel) + linear + f"; layers {', '.join(map(str, layers))}"


def _ids(shape, seq_len: int):
    torch, _ = import_torch()
    generator = torch.Generator().manual_seed(1)
    return torch.randint(0, shape.vocab_size, (BATCH, seq_len), generator=generator)


def _rows(name, shape, model, attention: str, seq_len: int) -> list[Row]:
    measured = saved_bytes(model, _ids(shape, seq_len))
    kernel = _kernel(attention, shape.qk_head_dim, shape.v_head_dim)
    rows = []
    for kind, layers in _kinds(shape).items():
        predicted = sum(
            sum(predicted_layer(shape, model.config, i, seq_len, kernel).values()) for i in layers
        )
        got = sum(measured.get(f"layer {i}", 0) for i in layers)
        note = _layer_note(shape, kernel, layers)
        rows.append(Row(name, attention, f"layer {kind}", BATCH, seq_len, predicted, got, note))
    outside = sum(predicted_outside(shape, model.config, seq_len).values())
    got = measured.get(OUTSIDE, 0)
    rows.append(Row(name, attention, OUTSIDE, BATCH, seq_len, outside, got, NOTE_OUTSIDE))
    total_predicted = sum(r.predicted for r in rows)
    total_measured = sum(measured.values())
    rows.append(
        Row(name, attention, TOTAL, BATCH, seq_len, total_predicted, total_measured, NOTE_TOTAL)
    )
    return rows


def _checkpoint_rows(name, shape, model, attention: str, seq_len: int) -> list[Row]:
    kept, working, peak = checkpointed_bytes(model, _ids(shape, seq_len))
    kernel = _kernel(attention, shape.qk_head_dim, shape.v_head_dim)
    config = model.config

    def layer_bytes(i, recompute):
        return sum(predicted_layer(shape, config, i, seq_len, kernel, recompute).values())

    row = partial(Row, name, attention, batch=BATCH, seq_len=seq_len)
    kept_rows, recomputed_rows = [], []
    for kind, layers in _kinds(shape).items():
        listed = ", ".join(map(str, layers))
        kept_rows.append(
            row(
                part=KEPT + f"layer {kind}",
                predicted=sum(layer_bytes(i, "full") for i in layers),
                measured=sum(kept.get(f"layer {i}", 0) for i in layers),
                note=NOTE_KEPT_LAYER.format(listed),
            )
        )
        recomputed_rows.append(
            row(
                part=RECOMPUTED + f"layer {kind}",
                predicted=max(layer_bytes(i, "none") for i in layers),
                measured=max(working.get(i, 0) for i in layers),
                note=NOTE_RECOMPUTED.format(kernel=kernel, layers=listed),
            )
        )
    outside = predicted_outside(shape, config, seq_len, kernel, checkpointed=True)
    kept_rows.append(
        row(
            part=KEPT + OUTSIDE,
            predicted=sum(outside.values()),
            measured=kept.get(OUTSIDE, 0),
            note=NOTE_KEPT_OUTSIDE,
        )
    )
    kept_rows.append(
        row(
            part=KEPT + TOTAL,
            predicted=sum(r.predicted for r in kept_rows),
            measured=sum(kept.values()),
            note=NOTE_KEPT_TOTAL,
        )
    )
    through = sum(v for k, v in outside.items() if k.startswith(THROUGH_BACKWARD))
    inputs = sum(layer_bytes(i, "full") for i in range(shape.num_layers))
    largest = max(r.predicted for r in recomputed_rows)
    peak_row = row(part=PEAK, predicted=inputs + largest + through, measured=peak, note=NOTE_PEAK)
    return kept_rows + recomputed_rows + [peak_row]


def run(name: str) -> list[Row]:
    """The rows of one tiny model: each attention implementation and sequence length, without
    and with checkpointed layers (the model is built once; ``set_attn_implementation`` switches
    eager and sdpa)."""
    shape = model_shape(name)
    model = build(_config(name), ATTENTIONS[0])
    rows = []
    for attention in ATTENTIONS:
        model.set_attn_implementation(attention)
        for seq_len in SEQ_LENS:
            rows.extend(_rows(name, shape, model, attention, seq_len))
            rows.extend(_checkpoint_rows(name, shape, model, attention, seq_len))
    return rows


def validation_rows() -> list[Row]:
    """All rows, in a fixed order."""
    rows: list[Row] = []
    for name in MODELS:
        rows.extend(run(name))
    return rows


def rows_to_csv(rows: list[Row]) -> str:
    return csv_text(rows, CSV_FIELDS)


def main(argv: list[str] | None = None) -> int:
    return command(
        "python -m costmodel.validate_memory",
        "Compare costmodel's activation bytes with the tensors a forward pass saves.",
        validation_rows,
        rows_to_csv,
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
