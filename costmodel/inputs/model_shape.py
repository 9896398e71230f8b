"""The model shape behind a scenario: its model config, or the course's model when the scenario's
structure keys agree with it, else a shape built from the keys; and the widths of that shape that
tensor parallelism splits (`tensor_parallel_widths`), which the scenario's validation checks
against `tensor_parallel` (inputs layer: the scenario is checked against the same shape that
`costmodel.evaluate.gemms` lists)."""

from __future__ import annotations

from typing import Any, Mapping

from costmodel.inputs import models
from costmodel.inputs.assumptions import COURSE_MODEL, assumed
from costmodel.inputs.families.common import Attention, Base, Mlp, Parts, build_shape
from costmodel.inputs.shape import FULL_ATTENTION, LINEAR_ATTENTION, ModelShape

#: Scenario keys that must agree with a config for the config to describe the scenario's model.
STRUCTURE_KEYS = ("hidden_size", "num_layers", "num_experts", "experts_per_token", "vocab_size")


def matching_shape(values: Mapping[str, Any], default_model: str = COURSE_MODEL):
    """The ModelShape of the scenario's model: the config named by `model:` if any, else the
    course's model; None when that config's shape (STRUCTURE_KEYS) is not the scenario's."""
    shape = models.load_shape(values.get("model") or default_model)
    keys = models.scenario_keys(shape)
    if all(values.get(key) == keys[key] for key in STRUCTURE_KEYS):
        return shape
    return None


def shape_from_keys(values: Mapping[str, Any]) -> tuple[ModelShape, str]:
    """A ModelShape built from the scenario's keys alone, for a scenario whose model config is
    unknown, and the note of what it assumes: K/V heads as many as query heads (no GQA); the
    head width from head_dim, else attention width / heads, else the course's assumed head_dim;
    a dense FFN of 4 x hidden (the course's rule), or the course model's expert width; no
    gated-DeltaNet widths (their projections are left out)."""
    hidden, layers = values["hidden_size"], values["num_layers"]
    width = values["attention_dim"]
    assumed_notes = ["no GQA"]
    head_dim = values.get("head_dim")
    heads = values.get("num_heads")
    if head_dim is None and heads:
        head_dim = width / heads
    if head_dim is None:
        head_dim = assumed("head_dim")
        assumed_notes.append(f"head_dim {head_dim} (course)")
    if not heads:
        heads = max(1, round(width / head_dim))
    every = values["full_attention_every"]
    layer_types = tuple(
        FULL_ATTENTION if (i + 1) % every == 0 else LINEAR_ATTENTION for i in range(layers)
    )
    base = Base(
        "scenario keys", hidden, layers, values["vocab_size"], heads, heads, False, layer_types
    )
    attn = Attention(
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=head_dim,
        qk_dim=head_dim,
        v_dim=head_dim,
        attention_dim=width,
        weights=int(4 * hidden * width),
        other=0,
    )
    experts = values["num_experts"]
    if experts:
        expert = models.load_shape(COURSE_MODEL).moe_intermediate_size
        assumed_notes.append(f"expert width {expert} of {COURSE_MODEL}")
        mlp = Mlp(
            tuple(True for _ in range(layers)), 0, experts, values["experts_per_token"], expert
        )
    else:
        assumed_notes.append("FFN width 4 x hidden (course rule)")
        mlp = Mlp(tuple(False for _ in range(layers)), 4 * hidden)
    if base.n_linear:
        assumed_notes.append("linear-attention projections unknown, left out")
    shape = build_shape("scenario keys", base, Parts(attn, mlp))
    return shape, "scenario keys; assumed: " + ", ".join(assumed_notes)


def scenario_shape(values: Mapping[str, Any]) -> tuple[ModelShape, str]:
    """The shape behind a scenario's GEMMs and where it comes from: its model config (or the
    course's model, when the structure keys agree), else one built from the keys."""
    shape = matching_shape(values)
    if shape is not None:
        return shape, f"config of {shape.name}"
    return shape_from_keys(values)


def tensor_parallel_widths(shape: ModelShape, mtp_layers: int = 0) -> list[tuple[str, int]]:
    """Every width of `shape` that the GEMM list (`costmodel.evaluate.gemms.model_gemms`) cuts
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
