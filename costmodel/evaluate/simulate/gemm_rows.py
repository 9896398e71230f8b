"""The rows of the GEMM table (``evaluate.simulate.gemms``), by part of the model: one row at the model's
widths (``gemm_row``), an MLP's two GEMMs, the linear-attention projections, the MoE layers (router,
routed and shared experts), the MTP projections and the lm_head. The attention projections and
the attention core are in ``evaluate.simulate.gemms``."""

from __future__ import annotations

from costmodel.derive import plain
from costmodel.derive.lanes import as_float, is_lanes
from costmodel.inputs.shape import ModelShape


def gemm_row(
    key, name, m_, k_, n_, layers, weights=True, uses=1, source=None, share=1.0, split=None
):
    """One row at the model's widths; `split` says how TP cuts it (model_gemms applies it):
    "column" (n / t), "row" (k / t), "heads" (the core: heads / t) or "replicated"."""
    return {
        "name": name,
        "key": key,
        "m": as_float(m_),
        "n": number(n_),
        "k": number(k_),
        "layers": int(layers),
        "weights": weights,
        "uses_per_token": uses,
        "forward_flops_per_token": None,  # set below
        "per_gpu_fraction": None,  # set below
        "source": source,
        "_share": share,
        "_split": split,
    }


def number(x):
    if is_lanes(x):  # a sweep's points at once (costmodel.derive.lanes)
        return x
    return int(x) if float(x).is_integer() else float(x)


def mlp_rows(
    shape: ModelShape, prefix, what, rows_m, width, layers, uses=1, source=None, single=False
) -> list[dict]:
    """An MLP's two GEMMs, keys `{prefix}_gate_up` and `{prefix}_down`: gated (SwiGLU, GeGLU),
    gate and up fused (hidden -> 2 x width), then down; a two-matrix MLP (GELU, squared ReLU),
    up (hidden -> width), then down. The first keeps its key `_gate_up` either way (the list's
    readers find an MLP's first GEMM by it); its name says which it is."""
    h = shape.hidden_size
    if shape.mlp_gated:
        first = f"{what} gate + up" + ("" if single else " (hidden -> 2 x intermediate)")
    else:
        first = f"{what} up" + ("" if single else " (hidden -> intermediate)")
        first += f", no gate ({shape.hidden_act})"
    return [
        gemm_row(
            f"{prefix}_gate_up",
            first,
            rows_m,
            h,
            (2 if shape.mlp_gated else 1) * width,
            layers,
            True,
            uses,
            source,
            split="column",
        ),
        gemm_row(
            f"{prefix}_down",
            f"{what} down" + ("" if single else " (intermediate -> hidden)"),
            rows_m,
            width,
            h,
            layers,
            True,
            uses,
            source,
            split="row",
        ),
    ]


def linear_attention_rows(shape: ModelShape, tokens: float, h: int) -> list[dict]:
    """The gated-DeltaNet layers' in- and out-projections (none when their widths are unknown)."""
    rows: list[dict] = []
    if shape.num_linear_attention_layers and shape.linear_num_value_heads:  # widths known
        key_dim = shape.linear_num_key_heads * shape.linear_key_head_dim
        value_dim = shape.linear_num_value_heads * shape.linear_value_head_dim
        n_lin = shape.num_linear_attention_layers
        rows += [
            gemm_row(
                "linear_in",
                "linear attention in-projection (q, k, v, z, b, a)",
                tokens,
                h,
                2 * key_dim + 2 * value_dim + 2 * shape.linear_num_value_heads,
                n_lin,
                split="column",
            ),
            gemm_row(
                "linear_out",
                "linear attention out-projection",
                tokens,
                value_dim,
                h,
                n_lin,
                split="row",
            ),
        ]
    return rows


def moe_rows(
    shape: ModelShape, layout: dict, batch: int, seq: float, tokens: float, n_moe: int, source: str
) -> list[dict]:
    """The MoE layers' router, one routed expert (at the rows of its EP group), the shared
    expert and its gate. With expert_tensor_parallel (MoE parallel folding) a routed expert is
    cut by ETP, not TP (`_etp`: gemms._split), and its rows are the tokens of its EP group's
    ETP x EP GPUs over TP: a stage's routed tokens spread over its ETP x EP x EDP = TP x CP x DP
    GPUs, one expert copy per EDP rank, so each GPU still runs 1/TP of its tokens' expert
    FLOPs."""
    cp, h = layout["context_parallel"], shape.hidden_size
    rows: list[dict] = []
    if shape.is_moe and n_moe:
        ep_size = layout["expert_parallel"]
        expert_m = plain.expert_rows(
            ep_size, batch, seq / cp, shape.experts_per_token, shape.num_experts
        )
        inter, k = shape.moe_intermediate_size, shape.experts_per_token
        where = f"{source}; rows of an EP group of {ep_size}"
        etp = layout.get("expert_tensor_parallel")
        if etp is not None:
            expert_m = expert_m * etp / layout["tensor_parallel"]
            where += f", expert TP {etp}"
        rows.append(
            gemm_row(
                "router",
                "router (hidden -> experts)",
                tokens,
                h,
                shape.num_experts,
                n_moe,
                split="replicated",
            )
        )
        experts = mlp_rows(
            shape, "expert", "one routed expert,", expert_m, inter, n_moe, k, where, single=True
        )
        if etp is not None:
            for row in experts:
                row["_etp"] = etp
        rows += experts
        if shape.shared_expert_intermediate_size:
            shared = shape.shared_expert_intermediate_size
            rows += mlp_rows(shape, "shared", "shared expert", tokens, shared, n_moe, single=True)
            if shape.shared_expert_gate:
                rows.append(
                    gemm_row(
                        "shared_expert_gate",
                        "shared-expert gate (hidden -> 1)",
                        tokens,
                        h,
                        1,
                        n_moe,
                        split="replicated",
                    )
                )
    return rows


def head_rows(shape: ModelShape, tokens: float, mtp: int, tp: int) -> list[dict]:
    """The MTP projections and the lm_head (its vocabulary padded for TP)."""
    h = shape.hidden_size
    rows: list[dict] = []
    if mtp:
        rows.append(
            gemm_row(
                "mtp_projection",
                "MTP projection ([embedding; hidden] -> hidden)",
                tokens,
                2 * h,
                h,
                mtp,
                split="column",
            )
        )
    lm_head = gemm_row(
        "lm_head",
        "lm_head (hidden -> vocab)",
        tokens,
        h,
        shape.vocab_size,
        1 + mtp,
        split="column",
    )
    if tp > 1 and shape.vocab_size % tp:  # the vocabulary padded to a multiple of TP
        lm_head["_n_gpu"] = -(-shape.vocab_size // tp)
        lm_head["_note"] = (
            f"vocabulary {shape.vocab_size:,} padded to {lm_head['_n_gpu'] * tp:,} for TP {tp} "
            "(Megatron-LM pads it to a multiple of 128 x TP)"
        )
    rows.append(lm_head)
    return rows
