"""The model's GEMMs for one scenario, from the real shapes: one list, used by the notebooks,
`costmodel gemms` and the tests.

Each row is one matrix multiply of the forward pass, (m x k)(k x n), per micro batch:

- weight GEMMs, one per weight matrix kind and layer kind: fused Q/K/V with the grouped-query
  widths (n = (heads x (2 with an output gate, else 1) + 2 x KV heads) x head_dim), or MLA's
  q_a/q_b (or q), kv_a, kv_b; the attention output; the gated-DeltaNet in/out projections; the
  dense MLP's gate+up and down (intermediate_size); one routed expert's gate+up and down
  (moe_intermediate_size), whose rows gather the tokens of an EP group (derive.moe.expert_rows);
  the shared expert and its gate; the router; the MTP projection when MTP layers are counted;
  the lm_head;
- the attention core, QK^T and AV of one head of one sequence of m tokens: activations only
  (`weights` false); their forward FLOPs per token are those of a token in such a sequence.

`intensity` is at `beta` bytes per element, `bound` compares it with the scenario's machine
balance, and `intensity_limit` is the ceiling a weight GEMM approaches as its rows grow,
2kn / (beta (k + n)): a memory-bound row whose ceiling is below the balance stays memory-bound
at any micro batch. `layers` says how many layers run the row and `forward_flops_per_token` what it costs per token
over all of them (2 k n per layer and use; a routed expert is used k_top times per token; the
core at the scenario's attention_flops square share). Over the weight rows the forward FLOPs
per token sum to exactly 2N, N the matmul parameters of `costmodel params` (with the MTP layers
when count_mtp): the test suite checks it for every preset and test config.

The shape is the scenario's model config (evaluate.shapes.scenario_shape); a scenario given only
by keys gets a shape built from them, with the widths it lacks assumed and named in `source`.
"""

from __future__ import annotations

from typing import Any

import sympy as sp

from costmodel.derive import attention, moe
from costmodel.derive.roofline import gemm_intensity
from costmodel.derive.symbols import E, S, b_micro, bytes_per_element, k_dim, k_top, m, n
from costmodel.evaluate.layouts import default_ep_size
from costmodel.evaluate.shapes import scenario_shape
from costmodel.inputs.shape import ModelShape

_intensity = sp.lambdify((m, n, k_dim, bytes_per_element), gemm_intensity, modules="math")
#: The intensity a weight GEMM tends to as its rows grow (derive.moe.intensity_limit).
_limit = sp.lambdify((n, k_dim, bytes_per_element), moe.intensity_limit, modules="math")


def _row(key, name, m_, k_, n_, layers, weights=True, uses=1, source=None, share=1.0):
    return {
        "name": name,
        "key": key,
        "m": float(m_),
        "n": int(n_) if float(n_).is_integer() else float(n_),
        "k": int(k_) if float(k_).is_integer() else float(k_),
        "layers": int(layers),
        "weights": weights,
        "uses_per_token": uses,
        "forward_flops_per_token": None,  # set below
        "source": source,
        "_share": share,
    }


def _attention_rows(shape: ModelShape, tokens: float, layers: int) -> list[dict]:
    h, heads = shape.hidden_size, shape.num_heads
    if shape.mla:
        nope = shape.qk_head_dim - shape.qk_rope_head_dim
        rows = []
        if shape.q_lora_rank:
            rows += [
                _row(
                    "q_a", "MLA q_a (hidden -> q_lora_rank)", tokens, h, shape.q_lora_rank, layers
                ),
                _row(
                    "q_b",
                    "MLA q_b (q_lora_rank -> heads x qk_head_dim)",
                    tokens,
                    shape.q_lora_rank,
                    heads * shape.qk_head_dim,
                    layers,
                ),
            ]
        else:
            rows.append(
                _row(
                    "q",
                    "MLA q (hidden -> heads x qk_head_dim)",
                    tokens,
                    h,
                    heads * shape.qk_head_dim,
                    layers,
                )
            )
        rows += [
            _row(
                "kv_a",
                "MLA kv_a (hidden -> kv_lora_rank + rope)",
                tokens,
                h,
                shape.kv_lora_rank + shape.qk_rope_head_dim,
                layers,
            ),
            _row(
                "kv_b",
                "MLA kv_b (kv_lora_rank -> heads x (nope + v))",
                tokens,
                shape.kv_lora_rank,
                heads * (nope + shape.v_head_dim),
                layers,
            ),
            _row(
                "attention_output",
                "attention output (heads x v -> hidden)",
                tokens,
                heads * shape.v_head_dim,
                h,
                layers,
            ),
        ]
        return rows
    q_out = heads * shape.head_dim * (2 if shape.attention_output_gate else 1)
    kv_out = 2 * shape.num_kv_heads * shape.head_dim
    gate = ", output gate" if shape.attention_output_gate else ""
    return [
        _row(
            "qkv",
            f"Q, K, V fused ({heads} + 2 x {shape.num_kv_heads} KV heads{gate})",
            tokens,
            h,
            q_out + kv_out,
            layers,
        ),
        _row(
            "attention_output",
            "attention output (heads x head_dim -> hidden)",
            tokens,
            heads * shape.head_dim,
            h,
            layers,
        ),
    ]


def _core_rows(
    shape: ModelShape, seq: float, layers: int, square: float, source: str
) -> list[dict]:
    """QK^T and AV of one head of one sequence (no weights)."""
    return [
        _row(
            "attention_scores",
            "attention core QK^T, one head",
            seq,
            shape.qk_head_dim,
            seq,
            layers,
            False,
            shape.num_heads,
            source,
            square,
        ),
        _row(
            "attention_values",
            "attention core AV, one head",
            seq,
            seq,
            shape.v_head_dim,
            layers,
            False,
            shape.num_heads,
            source,
            square,
        ),
    ]


def model_gemms(
    values: dict[str, Any],
    micro_batch: int | None = None,
    tokens_per_sequence: float | None = None,
    beta: int = 2,
) -> list[dict]:
    """The GEMM rows of a resolved scenario's values (see the module docstring), for micro
    batches of `micro_batch` sequences (default the scenario's) of `tokens_per_sequence` token
    slots (default seq_len), with intensity at `beta` bytes per element and `bound` against the
    scenario's machine balance."""
    shape, source = scenario_shape(values)
    batch = micro_batch or values["micro_batch"]
    seq = float(tokens_per_sequence or values["seq_len"])
    tokens = batch * seq
    h = shape.hidden_size
    mtp = values.get("num_mtp_layers", 0)
    n_full = shape.num_full_attention_layers + mtp
    n_moe = shape.num_moe_layers + (mtp if shape.is_moe else 0)
    n_dense = shape.num_dense_layers + (0 if shape.is_moe else mtp)
    rows = _attention_rows(shape, tokens, n_full)
    if shape.num_linear_attention_layers and shape.linear_num_value_heads:  # widths known
        key_dim = shape.linear_num_key_heads * shape.linear_key_head_dim
        value_dim = shape.linear_num_value_heads * shape.linear_value_head_dim
        n_lin = shape.num_linear_attention_layers
        rows += [
            _row(
                "linear_in",
                "linear attention in-projection (q, k, v, z, b, a)",
                tokens,
                h,
                2 * key_dim + 2 * value_dim + 2 * shape.linear_num_value_heads,
                n_lin,
            ),
            _row("linear_out", "linear attention out-projection", tokens, value_dim, h, n_lin),
        ]
    if n_dense and shape.intermediate_size:
        inter = shape.intermediate_size
        rows += [
            _row(
                "dense_gate_up",
                "dense MLP gate + up (hidden -> 2 x intermediate)",
                tokens,
                h,
                2 * inter,
                n_dense,
            ),
            _row(
                "dense_down", "dense MLP down (intermediate -> hidden)", tokens, inter, h, n_dense
            ),
        ]
    if shape.is_moe and n_moe:
        ep_size = default_ep_size(shape.num_experts, values["num_gpus"])
        expert_m = float(
            moe.expert_rows.subs(
                {
                    moe.ep: ep_size,
                    b_micro: batch,
                    S: seq,
                    k_top: shape.experts_per_token,
                    E: shape.num_experts,
                }
            )
        )
        inter, k = shape.moe_intermediate_size, shape.experts_per_token
        where = f"{source}; rows of an EP group of {ep_size}"
        rows += [
            _row("router", "router (hidden -> experts)", tokens, h, shape.num_experts, n_moe),
            _row(
                "expert_gate_up",
                "one routed expert, gate + up",
                expert_m,
                h,
                2 * inter,
                n_moe,
                True,
                k,
                where,
            ),
            _row(
                "expert_down", "one routed expert, down", expert_m, inter, h, n_moe, True, k, where
            ),
        ]
        if shape.shared_expert_intermediate_size:
            shared = shape.shared_expert_intermediate_size
            rows += [
                _row("shared_gate_up", "shared expert gate + up", tokens, h, 2 * shared, n_moe),
                _row("shared_down", "shared expert down", tokens, shared, h, n_moe),
            ]
            if shape.shared_expert_gate:
                rows.append(
                    _row(
                        "shared_expert_gate",
                        "shared-expert gate (hidden -> 1)",
                        tokens,
                        h,
                        1,
                        n_moe,
                    )
                )
    if mtp:
        rows.append(
            _row(
                "mtp_projection",
                "MTP projection ([embedding; hidden] -> hidden)",
                tokens,
                2 * h,
                h,
                mtp,
            )
        )
    rows.append(_row("lm_head", "lm_head (hidden -> vocab)", tokens, h, shape.vocab_size, 1 + mtp))
    square = float(attention.SQUARE_FRACTION[values.get("attention_flops", "full")])
    rows += _core_rows(shape, seq, n_full, square, source)
    balance = values["peak_flops"] / values["hbm_bandwidth"]
    for row in rows:
        row["source"] = row["source"] or source
        share = row.pop("_share")
        per_use = 2 * row["k"] * row["n"]
        if not row["weights"]:  # per token of the sequence: 2 s d per head, at the square share
            per_use = 2 * seq * row["k" if row["key"] == "attention_scores" else "n"] * share
        row["forward_flops_per_token"] = per_use * row["uses_per_token"] * row["layers"]
        row["intensity"] = _intensity(row["m"], row["n"], row["k"], beta)
        # a weight GEMM's ceiling as the micro batch grows; the core does not grow with it
        row["intensity_limit"] = (
            _limit(row["n"], row["k"], beta) if row["weights"] else row["intensity"]
        )
        row["bound"] = "compute" if row["intensity"] >= balance else "memory"
    return rows


def weight_flops_per_token(rows: list[dict]) -> float:
    """Forward FLOPs per token of the weight GEMMs: 2N for the shape's N."""
    return sum(r["forward_flops_per_token"] for r in rows if r["weights"])


def gemm_table(values: dict[str, Any]) -> dict[str, Any]:
    """`costmodel gemms --format json`: the GPU, its machine balance and the rows."""
    rows = model_gemms(values)
    return {
        "gpu": values["gpu"],
        "machine_balance": values["peak_flops"] / values["hbm_bandwidth"],
        "micro_batch": values["micro_batch"],
        "seq_len": values["seq_len"],
        "attention_flops": values["attention_flops"],
        "gemms": [
            {
                key: row[key]
                for key in (
                    "name",
                    "key",
                    "m",
                    "n",
                    "k",
                    "layers",
                    "weights",
                    "uses_per_token",
                    "forward_flops_per_token",
                    "intensity",
                    "intensity_limit",
                    "bound",
                    "source",
                )
            }
            for row in rows
        ],
    }
