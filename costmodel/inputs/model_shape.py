"""The model shape behind a scenario: its model config, or the course's model when the scenario's
structure keys agree with it, else a shape built from the keys; and the widths of that shape that
tensor parallelism splits (`tensor_parallel_widths`), which the scenario's validation checks
against `tensor_parallel` (inputs layer: the scenario is checked against the same shape that
`costmodel.evaluate.simulate.gemms` lists)."""

from __future__ import annotations

import functools
import os
from typing import Any, Mapping

from costmodel.derive.plain import head_width
from costmodel.inputs import models
from costmodel.inputs.assumptions import COURSE_MODEL, assumed
from costmodel.inputs.families.common import Attention, Base, Mlp, Parts, build_shape
from costmodel.inputs.shape import FULL_ATTENTION, LINEAR_ATTENTION, ModelShape

#: Scenario keys that must agree with a config for the config to describe the scenario's model.
STRUCTURE_KEYS = ("hidden_size", "num_layers", "num_experts", "experts_per_token", "vocab_size")

#: Scenario keys of a model given by numbers (a paper's table) rather than a config: each, when
#: set, must agree with a config too; a shape built from the keys uses them instead of its
#: assumptions (`shape_from_keys`). Null: the config's, or the assumption.
SHAPE_KEYS = (
    "ffn_hidden_size",
    "mlp_activation",
    "num_kv_heads",
    "moe_ffn_hidden_size",
    "shared_experts",
    "first_dense_layers",
)
#: The shape keys that describe MoE layers only.
MOE_SHAPE_KEYS = ("moe_ffn_hidden_size", "shared_experts", "first_dense_layers")


def _file_stamp(reference: str) -> tuple[int, int, int] | None:
    """What identifies the contents of a config file (inode, size, modification time), or None
    for a preset name (package data, which does not change while the process runs)."""
    if reference in models.PRESETS:
        return None
    try:
        status = os.stat(reference)
    except (OSError, ValueError):
        return None  # load_shape says what is wrong with the reference
    return status.st_ino, status.st_size, status.st_mtime_ns


@functools.lru_cache(maxsize=64)
def _shape_and_keys(reference: str, stamp: tuple[int, int, int] | None):
    shape = models.load_shape(reference)
    return shape, models.scenario_keys(shape)


def loaded_shape(reference: str):
    """``models.load_shape(reference)`` and its scenario keys, parsed once per file contents: one
    report asks for the scenario's shape dozens of times (every lever, every GEMM list), and a
    config edited on disk between two calls is read again."""
    return _shape_and_keys(reference, _file_stamp(reference))


def matching_shape(values: Mapping[str, Any], default_model: str = COURSE_MODEL):
    """The ModelShape of the scenario's model: the config named by `model:` if any, else the
    course's model; None when that config's shape (STRUCTURE_KEYS, and the SHAPE_KEYS the
    scenario sets) is not the scenario's."""
    shape, keys = loaded_shape(values.get("model") or default_model)
    if not all(values.get(key) == keys[key] for key in STRUCTURE_KEYS):
        return None
    if any(values.get(key) not in (None, keys[key]) for key in SHAPE_KEYS):
        return None
    return shape


def query_heads(values: Mapping[str, Any]) -> tuple[int, float, bool]:
    """(query heads, head width, whether the head width is the course's assumption) of a shape
    built from the keys: `num_heads`, else attention width / head_dim rounded (at least 1); the
    head width from head_dim, else attention width / heads, else the course's head_dim."""
    width = values["attention_dim"]
    head_dim, heads = values.get("head_dim"), values.get("num_heads")
    if head_dim is None and heads:
        head_dim = head_width(width, heads)
    course_head_dim = head_dim is None
    if course_head_dim:
        head_dim = assumed("head_dim")
    if not heads:
        heads = max(1, round(width / head_dim))
    return heads, head_dim, course_head_dim


def shape_from_keys(values: Mapping[str, Any]) -> tuple[ModelShape, str]:
    """A ModelShape built from the scenario's keys alone, for a scenario whose model config is
    unknown, and the note of what it still assumes. The keys of a model given by numbers
    (SHAPE_KEYS) are used when set: K/V heads `num_kv_heads` (else as many as query heads: no
    GQA), the MLP `mlp_activation` (else SwiGLU) of width `ffn_hidden_size` (else 4 x hidden, the
    course's rule), routed experts `moe_ffn_hidden_size` wide (else the course model's expert
    width) with `shared_experts` shared ones of that width (else none) after
    `first_dense_layers` dense layers (else none). The head width from head_dim, else attention
    width / heads, else the course's assumed head_dim; no gated-DeltaNet widths (their
    projections are left out)."""
    hidden, layers = values["hidden_size"], values["num_layers"]
    width = values["attention_dim"]
    heads, head_dim, course_head_dim = query_heads(values)
    assumed_notes = []
    kv_heads = values.get("num_kv_heads")
    if kv_heads is None:
        kv_heads = heads
        assumed_notes.append("no GQA")
    if course_head_dim:
        assumed_notes.append(f"head_dim {head_dim} (course)")
    every = values["full_attention_every"]
    # layer i is full attention when (i + 1) % every == 0; built in C (up to 100,000 layers)
    layer_types = ((LINEAR_ATTENTION,) * (every - 1) + (FULL_ATTENTION,)) * (layers // every) + (
        LINEAR_ATTENTION,
    ) * (layers % every)
    base = Base(  # by keyword: a record's quicker path (a sweep builds thousands)
        family="scenario keys",
        hidden=hidden,
        num_layers=layers,
        vocab=values["vocab_size"],
        num_heads=heads,
        num_kv_heads=kv_heads,
        tie=False,
        layer_types=layer_types,
    )
    kv_width = width * kv_heads / heads  # kv_heads x the head width
    attn = Attention(
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        qk_dim=head_dim,
        v_dim=head_dim,
        attention_dim=width,
        weights=_whole(2 * hidden * width + 2 * hidden * kv_width),
        other=0,
    )
    mlp = _mlp_from_keys(values, assumed_notes)
    if base.n_linear:
        assumed_notes.append("linear-attention projections unknown, left out")
    shape = build_shape("scenario keys", base, Parts(attention=attn, mlp=mlp))
    note = "scenario keys" + ("; assumed: " + ", ".join(assumed_notes) if assumed_notes else "")
    return shape, note


def _whole(x: float):
    return int(x) if float(x).is_integer() else x


def _mlp_from_keys(values: Mapping[str, Any], notes: list[str]) -> Mlp:
    """The MLPs of a shape built from the keys (see `shape_from_keys`), noting each assumption."""
    hidden, layers = values["hidden_size"], values["num_layers"]
    activation = values.get("mlp_activation")
    if activation is None:
        activation = "swiglu"
        notes.append("SwiGLU MLP")
    experts = values["num_experts"]
    first_dense = (values.get("first_dense_layers") or 0) if experts else layers
    ffn = values.get("ffn_hidden_size")
    if ffn is None and first_dense:
        ffn = 4 * hidden
        notes.append("FFN width 4 x hidden (course rule)")
    dense = min(first_dense, layers)
    flags = (False,) * dense + (True,) * (layers - dense)  # layer i is MoE when i >= first_dense
    gated = activation == "swiglu"
    act = "silu" if gated else "gelu"
    if not experts:
        return Mlp(moe_flags=flags, intermediate=ffn or 0, gated=gated, activation=act)
    expert = values.get("moe_ffn_hidden_size")
    if expert is None:
        expert = loaded_shape(COURSE_MODEL)[0].moe_intermediate_size
        notes.append(f"expert width {expert} of {COURSE_MODEL}")
    shared = values.get("shared_experts")
    if shared is None:
        shared = 0
        notes.append("no shared expert")
    return Mlp(
        moe_flags=flags,
        intermediate=ffn or 0,
        num_experts=experts,
        k=values["experts_per_token"],
        moe_inter=expert,
        shared_inter=shared * expert,
        gated=gated,
        activation=act,
    )


def scenario_shape(values: Mapping[str, Any]) -> tuple[ModelShape, str]:
    """The shape behind a scenario's GEMMs and where it comes from: its model config (or the
    course's model, when the structure keys agree), else one built from the keys."""
    shape = matching_shape(values)
    if shape is not None:
        return shape, f"config of {shape.name}"
    return shape_from_keys(values)


def tensor_parallel_widths(shape: ModelShape, mtp_layers: int = 0) -> list[tuple[str, int]]:
    """Every width of `shape` that the GEMM list (`costmodel.evaluate.simulate.gemms.model_gemms`) cuts
    by TP, named, in the order of the list: the attention heads (the fused QKV and MLA's q/kv_b
    columns, the attention output's rows and the core's heads per GPU are heads x a head width;
    KV heads fewer than TP are replicated, not split), the gated-DeltaNet in- and
    out-projections, the dense MLP, the routed and shared experts, the MTP projection (with
    `mtp_layers`). TP must divide each of them. The lm_head's vocabulary is not among them: the
    GEMM list pads it to a multiple of TP, as Megatron-LM does."""
    widths = [("the attention heads", shape.num_heads)]
    if shape.num_linear_attention_layers and shape.linear_num_value_heads:
        keys = shape.linear_num_key_heads * shape.linear_key_head_dim
        values = shape.linear_num_value_heads * shape.linear_value_head_dim
        in_projection = 2 * keys + 2 * values + 2 * shape.linear_num_value_heads
        widths += [
            ("the linear-attention in-projection", in_projection),
            ("the linear-attention value width", values),
        ]
    dense_layers = shape.num_dense_layers + (0 if shape.is_moe else mtp_layers)
    if dense_layers and shape.intermediate_size:
        widths.append(("the dense MLP width", shape.intermediate_size))
    if shape.is_moe and shape.num_moe_layers + mtp_layers:
        widths.append(("the routed expert width", shape.moe_intermediate_size))
        if shape.shared_expert_intermediate_size:
            widths.append(("the shared expert width", shape.shared_expert_intermediate_size))
    if mtp_layers:
        widths.append(("hidden_size, the MTP projection's output", shape.hidden_size))
    return widths
