"""``costmodel params`` as text: a readable table of a model's parameter counts, saying which N
is which (``costmodel.inputs.models.params_json`` is the JSON form)."""

from __future__ import annotations

from costmodel.formats import human_count, num, printable
from costmodel.inputs.shape import BREAKDOWN_KEYS, ModelShape

__all__ = ["params_text"]


def params_text(shape: ModelShape) -> str:
    """A readable table of the counts, saying which N is which. The model's name (a file's
    name) and type are file text: their control characters are shown escaped."""
    lines = _shape_lines(shape)
    rows = _count_rows(shape)
    name_w = max(len(r[0]) for r in rows)
    num_w = max(len(num(r[1])) for r in rows)
    hum_w = max(len(human_count(r[1])) for r in rows)
    lines.append("")
    for label, value, note in rows:
        if label.startswith("  ") and label.strip() == BREAKDOWN_KEYS[0]:
            lines.append("breakdown:")
        line = f"{label:<{name_w}}  {num(value):>{num_w}}  {human_count(value):>{hum_w}}"
        lines.append(f"{line}  {note}".rstrip())
    return "\n".join(printable(line) for line in lines) + "\n"


def _shape_lines(shape: ModelShape) -> list[str]:
    """The lines above the table: the model, its layers, attention, MLP, MoE, vocabulary and
    norms, and its MTP layers."""
    title = shape.name or shape.model_type
    layout = (
        f"{shape.num_layers} layers: {shape.num_full_attention_layers} full attention"
        + (f", {shape.num_linear_attention_layers} linear attention" if shape.is_hybrid else "")
        + (
            f" (every {shape.full_attention_every})"
            if shape.full_attention_every not in (None, 1)
            else ""
        )
    )
    lines = [
        f"model {title} ({shape.model_type})",
        f"  {layout}",
        f"  hidden_size {shape.hidden_size}; attention: {shape.num_heads} heads x head_dim "
        f"{shape.head_dim} = attention_dim {shape.attention_dim}, {shape.num_kv_heads} KV heads"
        + (", MLA" if shape.mla else "")
        + (", output gate" if shape.attention_output_gate else ""),
    ]
    if shape.num_sliding_window_layers:
        lines.append(
            f"  {shape.num_sliding_window_layers} of them local (sliding window "
            f"{shape.sliding_window}), counted as full attention: exact up to seq_len "
            f"{shape.sliding_window}, an upper bound of their attention core beyond"
        )
    if shape.attention_sinks:
        lines.append("  attention sinks: one learned logit per head (no FLOPs)")
    lines.append("  " + _mlp_line(shape))
    if shape.is_moe:
        lines.append(
            f"  MoE: {shape.num_experts} experts, top-{shape.experts_per_token}, on "
            f"{shape.num_moe_layers} layers ({shape.num_dense_layers} dense)"
        )
    positions = (
        f", {shape.position_embeddings} learned position embeddings"
        if shape.position_embeddings
        else ""
    )
    lines.append(
        f"  vocab {shape.vocab_size}, embeddings {'tied' if shape.tie_word_embeddings else 'untied'}"
        f"{positions}; norms per layer: {shape.norms_per_layer} "
        + ("LayerNorm (weight and bias)" if shape.norm == "layernorm" else "RMSNorm")
    )
    if shape.num_mtp_layers:
        lines.append(
            f"  {shape.num_mtp_layers} MTP layer(s): {num(shape.mtp_params)} parameters "
            f"({human_count(shape.mtp_params)}; embedding and head shared), "
            f"{num(shape.mtp_activated_params)} matmul parameters per token "
            f"({human_count(shape.mtp_activated_params)}, the head again included); not in the "
            "counts below: a scenario adds them to N with count_mtp: true"
        )
    return lines


def _count_rows(shape: ModelShape) -> list[tuple[str, int, str]]:
    """The table's rows (label, count, note): the counts, then the breakdown's components."""
    rows = [
        ("total_params", shape.total_params, "all parameters as published (tied weights once)"),
        (
            "activated_params",
            shape.activated_params,
            "matmul parameters per token, the N of 6ND, input embedding excluded",
        ),
        (
            "activated_params_published",
            shape.activated_params_published,
            "published active count, includes the input embedding",
        ),
        *(
            [
                (
                    "activated_params_with_mtp",
                    shape.activated_params + shape.mtp_activated_params,
                    "N with the MTP layers (scenario key count_mtp)",
                )
            ]
            if shape.num_mtp_layers
            else []
        ),
        ("embedding_params", shape.embedding_params, "input embedding (a lookup, no FLOPs)"),
        ("lm_head_params", shape.lm_head_params, "output projection (in N even when tied)"),
    ]
    rows += [(f"  {key}", value, "") for key, value in shape.breakdown_items]
    return rows


def _mlp_line(shape: ModelShape) -> str:
    """The MLP: gated (gate, up, down) or not (up, down), its activation and widths."""
    kind = (
        f"gated MLP (gate, up, down; {shape.hidden_act})"
        if shape.mlp_gated
        else f"two-matrix MLP (up, down; {shape.hidden_act})"
    )
    widths = []
    if shape.num_dense_layers and shape.intermediate_size:
        widths.append(f"dense width {shape.intermediate_size}")
    if shape.is_moe:
        widths.append(f"expert width {shape.moe_intermediate_size}")
        if shape.shared_expert_intermediate_size:
            widths.append(f"shared width {shape.shared_expert_intermediate_size}")
    return f"{kind}: " + ", ".join(widths) if widths else kind
