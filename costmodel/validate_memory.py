"""Measure the bytes a forward pass saves for backward and compare them with
``costmodel.derive.activations``.

Run ``python -m costmodel.validate_memory --out costmodel/course/saved_tensors.csv`` (needs the
pins in ``validate-requirements.txt``: torch and transformers; no network, no weights).

For each tiny, randomly initialised model of ``costmodel.validate.TINY_MODELS`` named in
``MODELS`` (a dense llama with GQA, a qwen3_moe with one dense and one MoE layer and the eager
per-expert loop, a deepseek_v3 with MLA, one dense and one MoE layer and a shared expert), built
in BF16 on CPU with ``attn_implementation`` eager and sdpa, one forward pass and the
cross-entropy loss on fp32 logits run under ``torch.autograd.graph.saved_tensors_hooks``, for
``BATCH`` sequences at each length of ``SEQ_LENS``. The pack hook wraps every saved tensor in a
small holder object; after the forward, the holders still alive are the tensors the autograd
graph keeps (a tensor saved by a node that was then dropped, such as DeepSeek-V3's group top-k,
whose result needs no gradient, is freed with its node and not counted). Each distinct storage
(keyed on ``untyped_storage().data_ptr()``) counts once with its whole ``nbytes()``; parameter
and buffer storages are left out.

Attribution: forward pre-hooks and hooks on the decoder layers (``model.model.layers[i]``) mark
the layer that is running when a tensor is saved. A storage saved only inside layer i belongs to
it; a storage saved in several layers (RoPE's cos and sin, computed once by the model) or outside
every layer (token ids, final norm, lm_head input, the loss's log-softmax) is "outside layers".

The prediction for each layer is ``layer_activation_bytes`` with what these models run:
``elementwise="eager"`` (Hugging Face's RMSNorm with its fp32 upcast, SwiGLU as separate ops),
``attention_kernel`` ``eager`` for eager, and for sdpa what CPU SDPA dispatches to:
``_scaled_dot_product_flash_attention_for_cpu`` (``flash``) when the query/key and value head
widths agree, the composite math path in fp32 (``math``) when they differ (MLA). Outside the
layers: ``model_activation_bytes`` with ``output_logits=False`` (the BF16 logits are the
forward's output, not saved for backward).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

from costmodel.derive.activations import layer_activation_bytes, model_activation_bytes
from costmodel.inputs.models import shape_from_config
from costmodel.validate import command, csv_text

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

MODELS = ("llama-gqa", "qwen3-moe", "deepseek-v3-mla")
ATTENTIONS = ("eager", "sdpa")
SEQ_LENS = (32, 128)
BATCH = 2
TOLERANCE = 0.10  # |measured / predicted - 1| allowed per row


OUTSIDE = "outside layers"
TOTAL = "total"

NOTE_LAYER = (
    "sum over the layers of this kind; predicted: layer_activation_bytes, elementwise=eager "
    "(HF RMSNorm fp32 upcast, SwiGLU as separate ops), attention_kernel={kernel}"
)
NOTE_OUTSIDE = (
    "token ids (int64), RoPE cos/sin (shared by all layers), final norm, lm_head input, fp32 "
    "log-softmax of the loss; the BF16 logits are the output, not saved; measured also holds "
    "the loss's 4-byte fp32 total_weight scalar"
)
NOTE_TOTAL = "every saved storage of the forward and the loss, each once"


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


def _import_torch():
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "costmodel.validate_memory needs torch and transformers: "
            "pip install -r validate-requirements.txt"
        ) from exc
    transformers.logging.set_verbosity_error()
    return torch, transformers


def _config(name: str) -> dict:
    from costmodel.validate import TINY_MODELS

    return TINY_MODELS[name][0]


def build(cfg: dict, attn_implementation: str):
    """The tiny model in BF16 (``dtype``: modules that transformers keeps in fp32, such as
    DeepSeek-V3's router weight, stay fp32), in training mode."""
    torch, transformers = _import_torch()
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


class _Held:
    """What the pack hook returns: the saved tensor, alive as long as its autograd node."""

    __slots__ = ("tensor", "where", "__weakref__")

    def __init__(self, tensor, where):
        self.tensor = tensor
        self.where = where


def saved_storages(model, ids) -> list[tuple[str, tuple, str, int]]:
    """One forward and the loss under ``saved_tensors_hooks``: every storage the graph keeps,
    as (where, shape, dtype, bytes); where is ``layer <i>`` or ``OUTSIDE``."""
    import weakref

    torch, _ = _import_torch()
    excluded = {p.untyped_storage().data_ptr() for p in model.parameters()}
    excluded |= {buf.untyped_storage().data_ptr() for buf in model.buffers()}
    active: list[str | None] = [None]
    handles = []
    for i, layer in enumerate(model.model.layers):

        def enter(module, args, kwargs, i=i):
            active[0] = f"layer {i}"

        def leave(module, args, kwargs, output):
            active[0] = None

        handles.append(layer.register_forward_pre_hook(enter, with_kwargs=True))
        handles.append(layer.register_forward_hook(leave, with_kwargs=True))
    held: weakref.WeakSet = weakref.WeakSet()

    def pack(tensor):
        item = _Held(tensor, active[0])
        held.add(item)
        return item

    def unpack(item):
        return item.tensor

    vocab = model.config.vocab_size
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            logits = model(input_ids=ids, use_cache=False).logits
            loss = torch.nn.functional.cross_entropy(
                logits.float().reshape(-1, vocab), ids.reshape(-1)
            )
        gc.collect()
        storages: dict[int, dict] = {}
        for item in list(held):
            tensor = item.tensor
            storage = tensor.untyped_storage()
            ptr = storage.data_ptr()
            if ptr in excluded:
                continue
            entry = storages.setdefault(
                ptr,
                {
                    "where": set(),
                    "shape": tuple(tensor.shape),
                    "dtype": str(tensor.dtype).removeprefix("torch."),
                    "bytes": storage.nbytes(),
                },
            )
            entry["where"].add(item.where)
        del loss, logits
    finally:
        for handle in handles:
            handle.remove()
    out = []
    for entry in storages.values():
        where = entry["where"]
        place = next(iter(where)) if len(where) == 1 and None not in where else OUTSIDE
        out.append((place, entry["shape"], entry["dtype"], entry["bytes"]))
    return out


def _kernel(attention: str, qk_head_dim: int, v_head_dim: int) -> str:
    if attention == "eager":
        return "eager"
    return "flash" if qk_head_dim == v_head_dim else "math"


def predicted_layer(shape, config, layer: int, seq_len: int, kernel: str) -> dict[str, float]:
    """``layer_activation_bytes`` of decoder layer ``layer`` of the tiny model."""
    moe = shape.moe_layer_flags[layer]
    return layer_activation_bytes(
        "mla" if shape.mla else "attention",
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
        norm_topk=bool(getattr(config, "norm_topk_prob", False)),
        attention_kernel=kernel,
        elementwise="eager",
        bytes_per_element=2,
    )


def predicted_outside(shape, seq_len: int) -> dict[str, float]:
    rope = shape.qk_rope_head_dim if shape.mla else shape.qk_head_dim
    return model_activation_bytes(
        b=BATCH,
        s=seq_len,
        hidden=shape.hidden_size,
        vocab=shape.vocab_size,
        rope_head_dim=rope,
        elementwise="eager",
        loss_fp32=True,
        output_logits=False,
        bytes_per_element=2,
    )


def _layer_kind(shape, layer: int) -> str:
    mixer = "mla" if shape.mla else "attention"
    return f"{mixer}+{'moe' if shape.moe_layer_flags[layer] else 'dense'}"


def _rows(name, shape, model, attention: str, seq_len: int) -> list[Row]:
    torch, _ = _import_torch()
    ids = torch.randint(
        0, shape.vocab_size, (BATCH, seq_len), generator=torch.Generator().manual_seed(1)
    )
    measured: dict[str, int] = {}
    for where, _, _, nbytes in saved_storages(model, ids):
        measured[where] = measured.get(where, 0) + nbytes
    kernel = _kernel(attention, shape.qk_head_dim, shape.v_head_dim)
    kinds: dict[str, list[int]] = {}
    for i in range(shape.num_layers):
        kinds.setdefault(_layer_kind(shape, i), []).append(i)
    rows = []
    for kind, layers in kinds.items():
        predicted = sum(
            sum(predicted_layer(shape, model.config, i, seq_len, kernel).values()) for i in layers
        )
        got = sum(measured.get(f"layer {i}", 0) for i in layers)
        note = NOTE_LAYER.format(kernel=kernel) + f"; layers {', '.join(map(str, layers))}"
        rows.append(Row(name, attention, f"layer {kind}", BATCH, seq_len, predicted, got, note))
    outside = sum(predicted_outside(shape, seq_len).values())
    rows.append(
        Row(
            name,
            attention,
            OUTSIDE,
            BATCH,
            seq_len,
            outside,
            measured.get(OUTSIDE, 0),
            NOTE_OUTSIDE,
        )
    )
    total_predicted = sum(r.predicted for r in rows)
    total_measured = sum(measured.values())
    rows.append(
        Row(name, attention, TOTAL, BATCH, seq_len, total_predicted, total_measured, NOTE_TOTAL)
    )
    return rows


def run(name: str) -> list[Row]:
    """The rows of one tiny model: each attention implementation and sequence length (the model
    is built once; ``set_attn_implementation`` switches eager and sdpa)."""
    cfg = _config(name)
    shape = shape_from_config(cfg, name=name)
    model = build(cfg, ATTENTIONS[0])
    rows = []
    for attention in ATTENTIONS:
        model.set_attn_implementation(attention)
        for seq_len in SEQ_LENS:
            rows.extend(_rows(name, shape, model, attention, seq_len))
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
