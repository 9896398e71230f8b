"""The model's GEMMs for one scenario, from the real shapes: one list, used by the notebooks,
`costmodel gemms` and the tests.

Each row is one matrix multiply of the forward pass, (m x k)(k x n), per micro batch, as one GPU
of the scenario's layout runs it:

- weight GEMMs, one per weight matrix kind and layer kind: fused Q/K/V with the grouped-query
  widths (n = (heads x (2 with an output gate, else 1) + 2 x KV heads) x head_dim), or MLA's
  q_a/q_b (or q), kv_a, kv_b; the attention output; the gated-DeltaNet in/out projections; the
  dense MLP's gate+up and down (intermediate_size; a two-matrix GELU MLP's up, under the same
  key `dense_gate_up`, and down); one routed expert's gate+up and down
  (moe_intermediate_size), whose rows gather the tokens of an EP group (derive.moe.expert_rows);
  the shared expert and its gate; the router; the MTP projection when MTP layers are counted;
  the lm_head;
- the attention core, QK^T and AV of one head of one sequence: activations only (`weights`
  false); their forward FLOPs per token are those of a token in such a sequence.

The layout (scenario keys tensor_parallel t, context_parallel c, expert_parallel,
sequence_parallel; all 1 / false, or absent, give the whole model's shapes as one GPU's):

- TP splits the projections as Megatron-LM does. Column-parallel weights get n / t: the fused
  QKV (KV heads fewer than t are replicated, one per GPU, as the source says), MLA's q (or q_b)
  and kv_b, the dense, shared and routed experts' gate+up (expert TP = TP), the linear-attention
  in-projection, the MTP projection and the lm_head (vocabulary-parallel). Row-parallel ones get
  k / t: the attention output, the three down projections, the linear-attention out-projection.
  MLA's q_a and kv_a, the router and the shared-expert gate are replicated (full n and k); with
  sequence_parallel they run on their GPU's 1/t of the tokens (m / t), without it every TP rank
  runs them on all of its tokens. The attention core's heads per GPU (`uses_per_token`) are
  heads / t.
- CP gives each GPU s / c of every sequence: the weight GEMMs' rows m are b x s / c, and the core
  QK^T of one head is (s / c) x s (m = s / c query rows against all n = s keys, as in ring
  attention), AV (s / c) x s times s x d.
- EP sets a routed expert's rows: the tokens of an EP group of GPUs, each with b x s / c tokens,
  k_top / E of them to each expert (balanced routing).
- sequence_parallel changes no other GEMM (the TP GEMMs see the all-gathered b x s / c rows), and
  neither DP nor PP does (PP gives each stage its share of `layers`, which stay the model's).

Per GPU: m, n, k, uses_per_token (the core), intensity, intensity_limit and bound. Per model
token: `forward_flops_per_token`, what the row costs per token of the WHOLE model over all of
its `layers` (2 k n per layer and use at the unsplit widths; a routed expert is used k_top
times per token; the core at the scenario's attention_flops square share), whatever the layout.
`per_gpu_fraction` is one GPU's share of it: one GPU runs forward_flops_per_token x
per_gpu_fraction FLOPs for each of its b x s / c tokens (1/t for a split row and the core, 1 for
a replicated one, 1/t for that with sequence_parallel; 1 for every row without TP). Over the
weight rows the forward FLOPs per token sum to exactly 2N, N the matmul parameters of `costmodel
params` (with the MTP layers when count_mtp): the test suite checks it for every preset and test
config.

`intensity` is at `beta` bytes per element, `bound` compares it with the scenario's machine
balance, and `intensity_limit` is the ceiling a weight GEMM approaches as its rows grow,
2kn / (beta (k + n)): a memory-bound row whose ceiling is below the balance stays memory-bound
at any micro batch.

The shape is the scenario's model config (inputs.model_shape.scenario_shape); a scenario given only
by keys gets a shape built from them, with the widths it lacks assumed and named in `source`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, fields
from typing import Any

from costmodel.derive import numeric, plain
from costmodel.derive.lanes import as_float
from costmodel.evaluate.simulate.gemm_rows import (
    gemm_row,
    head_rows,
    linear_attention_rows,
    mlp_rows,
    moe_rows,
    number,
)
from costmodel.inputs.scenario import Scenario, as_scenario
from costmodel.inputs.shape import ModelShape
from costmodel.records import frozen_dataclass


@frozen_dataclass
class GemmRow(Mapping):
    """One GEMM of the list (module docstring), per GPU of the scenario's layout: the data that
    `costmodel.present.gemms` renders. `row["key"]` reads a field as `row.key` does (the
    notebooks and tests index rows by field name)."""

    name: str
    key: str
    m: float
    n: int | float
    k: int | float
    layers: int
    weights: bool
    uses_per_token: int | float
    forward_flops_per_token: float
    per_gpu_fraction: float
    intensity: float
    intensity_limit: float
    bound: str
    source: str

    def __getitem__(self, field: str) -> Any:
        if field not in ROW_FIELDS:
            raise KeyError(field)
        return getattr(self, field)

    def __iter__(self) -> Iterator[str]:
        return iter(ROW_FIELDS)

    def __len__(self) -> int:
        return len(ROW_FIELDS)

    def as_dict(self) -> dict[str, Any]:
        """The row as `costmodel gemms --format json` writes it (fields in this order)."""
        return asdict(self)


ROW_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(GemmRow))


def _limit(n_: float, k_: float, beta: float) -> float:
    """derive.moe.intensity_limit, 2kn / (β(k + n)): the intensity a weight GEMM tends to as its
    rows grow (checked against the derived limit by the same test)."""
    return 2 * k_ * n_ / (beta * (k_ + n_))


def gemm_layout(sc: Scenario) -> dict[str, Any]:
    """The layout the rows are per GPU of: TP, CP, EP (1 for a dense model), sequence_parallel;
    expert_tensor_parallel where the scenario states it (MoE parallel folding)."""
    sc = as_scenario(sc)
    layout = sc.layout
    out = {
        "tensor_parallel": layout.tensor_parallel,
        "context_parallel": layout.context_parallel,
        "expert_parallel": layout.expert_parallel if sc.shape.is_moe else 1,
        "sequence_parallel": layout.sequence_parallel,
    }
    if layout.expert_tensor_parallel is not None and sc.shape.is_moe:
        out["expert_tensor_parallel"] = layout.expert_tensor_parallel
    return out


def _attention_rows(shape: ModelShape, tokens: float, layers: int, tp: int) -> list[dict]:
    """The attention GEMMs of the full-attention layers: MLA's (`_mla_rows`), or the fused
    Q, K, V projection (the KV heads replicated where TP does not divide them) and the output."""
    h, heads = shape.hidden_size, shape.num_heads
    if shape.mla:
        return _mla_rows(shape, tokens, layers)
    q_out = heads * shape.head_dim * (2 if shape.attention_output_gate else 1)
    kv_heads = shape.num_kv_heads
    kv_out = 2 * kv_heads * shape.head_dim
    gate = ", output gate" if shape.attention_output_gate else ""
    qkv = gemm_row(
        "qkv",
        f"Q, K, V fused ({heads} + 2 x {kv_heads} KV heads{gate})",
        tokens,
        h,
        q_out + kv_out,
        layers,
        split="column",
    )
    if tp > 1 and kv_heads % tp:  # each GPU keeps ceil(KV heads / t) of them, replicated
        kv_gpu = -(-kv_heads // tp)
        qkv["_n_gpu"] = q_out / tp + 2 * kv_gpu * shape.head_dim
        qkv["_note"] = f"{kv_heads} KV heads at TP {tp}: {kv_gpu} per GPU, replicated"
    return [
        qkv,
        gemm_row(
            "attention_output",
            "attention output (heads x head_dim -> hidden)",
            tokens,
            heads * shape.head_dim,
            h,
            layers,
            split="row",
        ),
    ]


def _mla_rows(shape: ModelShape, tokens: float, layers: int) -> list[dict]:
    """The attention GEMMs of multi-head latent attention (MLA): the low-rank Q (or one Q
    projection), K/V down and up, the output."""
    h, heads = shape.hidden_size, shape.num_heads
    nope = shape.qk_head_dim - shape.qk_rope_head_dim
    rows = []
    if shape.q_lora_rank:
        rows += [
            gemm_row(
                "q_a",
                "MLA q_a (hidden -> q_lora_rank)",
                tokens,
                h,
                shape.q_lora_rank,
                layers,
                split="replicated",
            ),
            gemm_row(
                "q_b",
                "MLA q_b (q_lora_rank -> heads x qk_head_dim)",
                tokens,
                shape.q_lora_rank,
                heads * shape.qk_head_dim,
                layers,
                split="column",
            ),
        ]
    else:
        rows.append(
            gemm_row(
                "q",
                "MLA q (hidden -> heads x qk_head_dim)",
                tokens,
                h,
                heads * shape.qk_head_dim,
                layers,
                split="column",
            )
        )
    rows += [
        gemm_row(
            "kv_a",
            "MLA kv_a (hidden -> kv_lora_rank + rope)",
            tokens,
            h,
            shape.kv_lora_rank + shape.qk_rope_head_dim,
            layers,
            split="replicated",
        ),
        gemm_row(
            "kv_b",
            "MLA kv_b (kv_lora_rank -> heads x (nope + v))",
            tokens,
            shape.kv_lora_rank,
            heads * (nope + shape.v_head_dim),
            layers,
            split="column",
        ),
        gemm_row(
            "attention_output",
            "attention output (heads x v -> hidden)",
            tokens,
            heads * shape.v_head_dim,
            h,
            layers,
            split="row",
        ),
    ]
    return rows


def _core_rows(
    shape: ModelShape, seq: float, cp: int, layers: int, square: float, source: str
) -> list[dict]:
    """QK^T and AV of one head of one sequence (no weights): a GPU's s / c queries against
    all s keys."""
    return [
        gemm_row(
            "attention_scores",
            "attention core QK^T, one head",
            seq / cp,
            shape.qk_head_dim,
            seq,
            layers,
            False,
            shape.num_heads,
            source,
            square,
            "heads",
        ),
        gemm_row(
            "attention_values",
            "attention core AV, one head",
            seq / cp,
            seq,
            shape.v_head_dim,
            layers,
            False,
            shape.num_heads,
            source,
            square,
            "heads",
        ),
    ]


def _split(row: dict, tp: int, sequence_parallel: bool) -> float:
    """Cut a row (its flops per token already set) to one GPU of a TP group of `tp`; return
    that GPU's share of the row's FLOPs per token of its group."""
    split = row.pop("_split")
    n_gpu = row.pop("_n_gpu", None)
    etp = row.pop("_etp", None)
    if etp is not None:  # a routed expert cut by ETP, its rows already the GPU's (gemm_rows)
        row["n" if split == "column" else "k"] = number(
            row["n" if split == "column" else "k"] / etp
        )
        return 1 / tp
    if tp == 1 or split is None:
        return 1.0
    if split == "column":
        n_gpu = n_gpu if n_gpu is not None else row["n"] / tp
        fraction = n_gpu / row["n"]
        row["n"] = number(n_gpu)
        return fraction
    if split == "row":
        row["k"] = number(row["k"] / tp)
        return 1 / tp
    if split == "heads":
        row["uses_per_token"] = number(row["uses_per_token"] / tp)
        return 1 / tp
    if sequence_parallel:  # replicated: each TP rank runs its own 1/t of the tokens
        row["m"] = row["m"] / tp
        return 1 / tp
    return 1.0


def _complete(
    rows: list[dict], sc: Scenario, layout: dict, seq: float, source: str, beta: int
) -> None:
    """Each row's source, FLOPs per token, share per GPU, intensity and bound, in place."""
    tp = layout["tensor_parallel"]
    balance = sc.peak_flops / sc.hbm_bandwidth
    for row in rows:
        row["source"] = row["source"] or source
        if note := row.pop("_note", None):
            row["source"] += f"; {note}"
        share = row.pop("_share")
        # the whole model's FLOPs per token, at the unsplit widths
        per_use = 2 * row["k"] * row["n"]
        if not row["weights"]:  # per token of the sequence: 2 s d per head, at the square share
            per_use = 2 * seq * row["k" if row["key"] == "attention_scores" else "n"] * share
        row["forward_flops_per_token"] = per_use * row["uses_per_token"] * row["layers"]
        row["per_gpu_fraction"] = _split(row, tp, layout["sequence_parallel"])
        row["intensity"] = plain.intensity(row["m"], row["n"], row["k"], beta)
        # a weight GEMM's ceiling as the micro batch grows; the core does not grow with it
        row["intensity_limit"] = (
            _limit(row["n"], row["k"], beta) if row["weights"] else row["intensity"]
        )
        row["bound"] = "compute" if row["intensity"] >= balance else "memory"


def model_gemms(
    sc: Scenario,
    micro_batch: int | None = None,
    tokens_per_sequence: float | None = None,
    beta: int = 2,
) -> list[GemmRow]:
    """The GEMM rows of a resolved scenario's values (see the module docstring), per GPU of the
    scenario's layout, for micro batches of `micro_batch` sequences (default the scenario's) of
    `tokens_per_sequence` token slots (default seq_len), with intensity at `beta` bytes per
    element and `bound` against the scenario's machine balance."""
    sc = as_scenario(sc)
    layout = gemm_layout(sc)
    seq = as_float(tokens_per_sequence or sc.seq_len)
    rows = _model_rows(sc, layout, micro_batch or sc.micro_batch, seq)
    _complete(rows, sc, layout, seq, sc.shape_source, beta)
    return [GemmRow(**row) for row in rows]


def weight_shapes(
    sc: Scenario, micro_batch: int | None = None
) -> list[tuple[str, float, Any, Any]]:
    """(key, m, n, k) of the weight rows of `model_gemms` (same sizes, one GPU's), without
    their FLOPs, intensity or source: what the step time reads (compute_time._gemm_rows, the
    plan's search for thousands of layouts)."""
    sc = as_scenario(sc)
    layout = gemm_layout(sc)
    tp, sequence_parallel = layout["tensor_parallel"], layout["sequence_parallel"]
    out = []
    for row in _model_rows(sc, layout, micro_batch or sc.micro_batch, as_float(sc.seq_len)):
        if row["weights"]:
            _split(row, tp, sequence_parallel)
            out.append((row["key"], row["m"], row["n"], row["k"]))
    return out


def _model_rows(sc: Scenario, layout: dict, batch: int, seq: float) -> list[dict]:
    """The rows of `model_gemms` at the model's widths, before TP cuts them (`_complete`)."""
    shape, source = sc.shape, sc.shape_source
    tp, cp = layout["tensor_parallel"], layout["context_parallel"]
    tokens = batch * seq / cp  # one GPU's rows: its 1/c of each sequence
    h = shape.hidden_size
    mtp = sc.num_mtp_layers
    n_full = shape.num_full_attention_layers + mtp
    n_moe = shape.num_moe_layers + (mtp if shape.is_moe else 0)
    n_dense = shape.num_dense_layers + (0 if shape.is_moe else mtp)
    rows = _attention_rows(shape, tokens, n_full, tp)
    rows += linear_attention_rows(shape, tokens, h)
    if n_dense and shape.intermediate_size:
        rows += mlp_rows(shape, "dense", "dense MLP", tokens, shape.intermediate_size, n_dense)
    rows += moe_rows(shape, layout, batch, seq, tokens, n_moe, source)
    rows += head_rows(shape, tokens, mtp, tp)
    square = float(numeric.SQUARE_FRACTION[sc.attention_flops])
    rows += _core_rows(shape, seq, cp, n_full, square, source)
    return rows


def weight_flops_per_token(rows: list[GemmRow]) -> float:
    """Forward FLOPs per token of the weight GEMMs: 2N for the shape's N (whatever the
    layout)."""
    return sum(r["forward_flops_per_token"] for r in rows if r["weights"])


def gemm_table(sc: Scenario) -> dict[str, Any]:
    """What `costmodel gemms` shows: the GPU, its machine balance, the layout and the rows
    (`GemmRow`, rendered by costmodel.present.gemms); the command adds each weight row's
    efficiency (compute_time.row_efficiencies: this module cannot import the step time's)."""
    sc = as_scenario(sc)
    rows = model_gemms(sc)
    return {
        "gpu": sc.gpu,
        "machine_balance": sc.peak_flops / sc.hbm_bandwidth,
        "micro_batch": sc.micro_batch,
        "seq_len": sc.seq_len,
        "attention_flops": sc.attention_flops,
        "layout": gemm_layout(sc),
        "gemms": rows,
    }
