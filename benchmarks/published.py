"""Published training runs as data: ``benchmarks/published_runs.csv``, typed, and turned into
scenario overrides.

The table is the test set of the memory model (issue 19) and of the step-time model (issue 20):
one row per published run, every number as its source prints it, the source and what the row
assumes where the source is silent in each row (``benchmarks/published_runs.md`` explains every
source and column).

    from benchmarks.published import rows, overrides
    from costmodel.inputs.scenario import resolve
    row = next(r for r in rows() if r["id"] == "deepseek-v3-2048xh800")
    scenario = resolve(overrides=overrides(row))

``rows()`` parses the CSV (ints, floats, booleans, ``None`` for an empty cell);
``overrides(row)`` gives the scenario keys; ``step_time(row)`` and ``flops_per_token(row)`` say
how a step time is derived where the source prints a throughput instead.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from costmodel.derive import activations as act
from costmodel.inputs import attention_kernels, frameworks
from costmodel.inputs.fields import FIELDS

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CSV_PATH = HERE / "published_runs.csv"

#: The columns the brief of issue 19 lists, in its order.
COLUMNS = (
    "id", "source", "source_kind", "run_kind", "model", "model_ref", "hidden_size", "num_layers",
    "num_heads", "num_kv_heads", "ffn_hidden_size", "mlp_activation", "vocab_size", "num_experts",
    "experts_per_token", "moe_ffn_hidden_size", "shared_experts", "first_dense_layers", "gpu",
    "num_gpus", "tensor_parallel", "pipeline_parallel", "virtual_pipeline", "context_parallel",
    "expert_parallel", "data_parallel", "sequence_parallel", "micro_batch",
    "global_batch_samples", "seq_len", "recompute", "recompute_modules", "zero_stage", "fp8",
    "step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "hfu", "flop_convention",
    "printed_as", "assumed", "notes",
)  # fmt: skip
#: Columns beyond the brief's (published_runs.md, "Columns", says why each is needed).
EXTRA_COLUMNS = (
    "head_dim", "mtp_layers", "attention_flops", "attention_kernel", "flop_formula",
    "peak_tflops", "tokens_per_s_scope", "memory_gib", "grad_bytes", "pipeline_schedule",
    "cp_comm_type", "fp8_activations", "fp8_dispatch", "moe_router_max_nodes", "framework",
    "gpu_printed", "date", "expert_tensor_parallel", "dropout", "tp_comm_overlap",
    "pipeline_split",
)  # fmt: skip
INT_COLUMNS = frozenset(
    "hidden_size num_layers num_heads num_kv_heads ffn_hidden_size vocab_size num_experts "
    "experts_per_token moe_ffn_hidden_size shared_experts first_dense_layers num_gpus "
    "tensor_parallel pipeline_parallel virtual_pipeline context_parallel expert_parallel "
    "data_parallel micro_batch global_batch_samples seq_len zero_stage head_dim mtp_layers "
    "grad_bytes moe_router_max_nodes expert_tensor_parallel".split()
)
FLOAT_COLUMNS = frozenset(
    "step_time_s tokens_per_s tflops_per_gpu mfu hfu peak_tflops memory_gib".split()
)
BOOL_COLUMNS = frozenset({"sequence_parallel", "fp8_dispatch", "dropout", "tp_comm_overlap"})
#: Columns that every row fills (the rest may be empty where the source is silent).
REQUIRED_VALUES = (
    "id", "source", "source_kind", "run_kind", "model", "gpu", "num_gpus",
    "global_batch_samples", "seq_len", "fp8", "flop_convention", "printed_as", "flop_formula",
)  # fmt: skip
CHOICES = {
    "source_kind": {"paper", "repository", "docs"},
    "run_kind": {"benchmark", "production"},
    "mlp_activation": {"swiglu", "gelu", "squared_relu"},
    "recompute": set(act.RECOMPUTE),
    "attention_flops": {"full", "causal"},
    "attention_kernel": set(attention_kernels.KIND),
    "tokens_per_s_scope": {"gpu", "cluster"},
    "cp_comm_type": set(FIELDS["cp_comm_type"].choices),
    "fp8_activations": set(act.FP8_ACTIVATIONS),
    "pipeline_split": {"embedding", "loss", "embedding+loss"},
    "flop_formula": {
        "megatron_gpt_72", "megatron_gpt_96", "megatron_deepspeed_hfu", "palm", "nemo_llama",
        "nemo_gpt", "torchtitan", "mosaic", "megatron_bridge", "none",
    },
}  # fmt: skip
#: Megatron-LM's module names (recompute_modules).
RECOMPUTE_MODULES = frozenset(act.RECOMPUTE_MODULES)
#: The FLOP formulas flops_per_token() evaluates from the shape columns.
FORMULAS = ("megatron_gpt_72", "megatron_gpt_96", "megatron_deepspeed_hfu", "palm",
            "nemo_llama", "nemo_gpt", "torchtitan")  # fmt: skip


def _value(row_id: str, column: str, text: str) -> Any:
    text = text.strip()
    if text == "":
        return None
    try:
        if column in INT_COLUMNS:
            return int(text)
        if column in FLOAT_COLUMNS:
            return float(text)
    except ValueError:
        raise ValueError(f"{row_id}: {column} {text!r} is not a number") from None
    if column in BOOL_COLUMNS:
        if text not in ("true", "false"):
            raise ValueError(f"{row_id}: {column} {text!r} is not true or false")
        return text == "true"
    if column == "recompute_modules":
        return tuple(name.strip() for name in text.split(","))
    return text


def rows(path: str | Path = CSV_PATH) -> list[dict[str, Any]]:
    """Every row of the table, typed: ints, floats, booleans, a tuple of recompute modules, text,
    and None for an empty cell. A cell that does not parse raises ValueError naming the row."""
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in COLUMNS + EXTRA_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path}: columns missing: {', '.join(missing)}")
        return [
            {column: _value(raw["id"], column, raw[column] or "") for column in raw}
            for raw in reader
        ]


# ------------------------------------------------------------------------------ FLOP counts
def _head_dim(row: dict[str, Any]) -> int:
    return row["head_dim"] or row["hidden_size"] // row["num_heads"]


def _attention_width(row: dict[str, Any]) -> int:
    return row["num_heads"] * _head_dim(row)


def _kv_width(row: dict[str, Any]) -> int:
    return (row["num_kv_heads"] or row["num_heads"]) * _head_dim(row)


def _layer_matmul_params(row: dict[str, Any]) -> int:
    """Weights of one dense layer's matrix multiplies (no bias, no norm): q, k, v, o and the MLP
    (three matrices for SwiGLU, two otherwise)."""
    h, a, kv = row["hidden_size"], _attention_width(row), _kv_width(row)
    mlp = (3 if row["mlp_activation"] == "swiglu" else 2) * h * row["ffn_hidden_size"]
    return h * a + 2 * h * kv + a * h + mlp


def dense_matmul_params(row: dict[str, Any]) -> int:
    """N as costmodel counts it for a dense model: every matmul weight, lm_head in, input
    embedding out."""
    return row["num_layers"] * _layer_matmul_params(row) + row["vocab_size"] * row["hidden_size"]


def flops_per_token(row: dict[str, Any]) -> float | None:
    """Training FLOPs per token under the row's own convention (``flop_formula``), from the
    shape columns; None for a formula this module does not evaluate (Megatron-Bridge, MosaicML
    and DeepSeek print a throughput in tokens, so no count is needed to get their step time).

    - ``megatron_gpt_72``: 72 L h^2 (1 + s/(6h) + V/(12 L h)) (Korthikanti et al., model FLOPs;
      Megatron-Core's num_floating_point_operations for a GELU 4h MLP, full s x s square);
    - ``megatron_gpt_96`` and ``megatron_deepspeed_hfu``: 96 L h^2 (1 + s/(6h) + V/(16 L h))
      (Narayanan et al.; Megatron-DeepSpeed with activation checkpointing: hardware FLOPs);
    - ``palm``: 6 N + 12 L (H Q) s, N = dense_matmul_params (Chowdhery et al.; the N Llama 3
      uses is not printed: this N is the row's stated assumption);
    - ``nemo_llama``: 12 L h^2 (1 + g/n + s/h) + 18 L F h + 6 V h (dgxc-benchmarking Notes);
    - ``nemo_gpt``: 24 L h^2 + 12 L h s + 48 L h^2 + 6 V h (dgxc-benchmarking Notes);
    - ``torchtitan``: 6 N + 12 L (H Q) s with N every parameter (embeddings, output, norms in).
    """
    formula = row["flop_formula"]
    if formula not in FORMULAS:
        return None
    h, layers, s, vocab = row["hidden_size"], row["num_layers"], row["seq_len"], row["vocab_size"]
    if formula == "megatron_gpt_72":
        return 72 * layers * h**2 * (1 + s / (6 * h) + vocab / (12 * layers * h))
    if formula in ("megatron_gpt_96", "megatron_deepspeed_hfu"):
        return 96 * layers * h**2 * (1 + s / (6 * h) + vocab / (16 * layers * h))
    attention = 12 * layers * _attention_width(row) * s
    if formula == "palm":
        return 6 * dense_matmul_params(row) + attention
    if formula == "torchtitan":
        norms = layers * 2 * h + h
        every = layers * _layer_matmul_params(row) + 2 * vocab * h + norms
        return 6 * every + attention
    if formula == "nemo_llama":
        groups = row["num_kv_heads"] or row["num_heads"]
        return (
            12 * layers * h**2 * (1 + groups / row["num_heads"] + s / h)
            + 18 * layers * row["ffn_hidden_size"] * h
            + 6 * vocab * h
        )
    return 24 * layers * h**2 + 12 * layers * h * s + 48 * layers * h**2 + 6 * vocab * h


# ------------------------------------------------------------------------------ throughput
def tokens_per_step(row: dict[str, Any]) -> int:
    """Tokens of one optimizer step: global batch x sequence length (pre-training packs every
    sequence full, so every slot is a token)."""
    return row["global_batch_samples"] * row["seq_len"]


def cluster_tokens_per_s(row: dict[str, Any]) -> float | None:
    """The printed tokens/s over the whole job (a per-GPU figure times num_gpus), or None."""
    tps = row["tokens_per_s"]
    if tps is None:
        return None
    return tps * row["num_gpus"] if row["tokens_per_s_scope"] == "gpu" else tps


def step_time(row: dict[str, Any]) -> tuple[float | None, str]:
    """Seconds per optimizer step and how they were obtained.

    1. ``printed``: the source prints the step (iteration) time: ``step_time_s``.
    2. ``from tokens/s``: tokens_per_step / cluster tokens/s, where the source prints a token
       throughput (per GPU x num_gpus, or for the whole job; DeepSeek-V3's is itself derived
       from GPU hours per trillion tokens).
    3. ``from TFLOP/s``: tokens_per_step x flops_per_token / (TFLOP/s per GPU x 1e12 x
       num_gpus), where the source prints only FLOP/s per GPU (Narayanan et al., the Megatron-LM
       H100 table, Llama 3): the FLOPs counted under the source's own formula, so the time is
       the one that formula and the printed figure imply.
    (None, reason) when none applies.
    """
    if row["step_time_s"] is not None:
        return row["step_time_s"], "printed"
    tokens = tokens_per_step(row)
    tps = cluster_tokens_per_s(row)
    if tps:
        return tokens / tps, "from tokens/s"
    per_token = flops_per_token(row)
    if row["tflops_per_gpu"] and per_token:
        return tokens * per_token / (row["tflops_per_gpu"] * 1e12 * row["num_gpus"]), (
            f"from TFLOP/s ({row['flop_formula']})"
        )
    return None, "no step time, token or FLOP throughput this module can use"


# ------------------------------------------------------------------------------ overrides
#: The GPU names of costmodel's table the rows use (a row's card as printed is gpu_printed).
GPUS = frozenset({"H100-SXM", "H800", "H200", "A100-80GB", "B200"})


def _model_keys(row: dict[str, Any]) -> dict[str, Any]:
    ref = row["model_ref"]
    if ref:
        path = REPO / ref
        keys: dict[str, Any] = {"model": str(path) if path.exists() else ref}
        keys["count_mtp"] = bool(row["mtp_layers"])
        return keys
    moe = bool(row["num_experts"])
    keys = {
        "hidden_size": row["hidden_size"],
        "num_layers": row["num_layers"],
        "full_attention_every": 1,
        "num_heads": row["num_heads"],
        "num_kv_heads": row["num_kv_heads"] or row["num_heads"],
        "mlp_activation": "swiglu" if row["mlp_activation"] == "swiglu" else "gelu",
        "vocab_size": row["vocab_size"],
        "num_experts": row["num_experts"] or 0,
        "experts_per_token": row["experts_per_token"] or 0,
    }
    if row["head_dim"]:
        keys["head_dim"] = row["head_dim"]
    if row["ffn_hidden_size"]:
        keys["ffn_hidden_size"] = row["ffn_hidden_size"]
    if moe:
        keys["moe_ffn_hidden_size"] = row["moe_ffn_hidden_size"]
        keys["shared_experts"] = row["shared_experts"] or 0
        keys["first_dense_layers"] = row["first_dense_layers"] or 0
    return keys


def _set(keys: dict[str, Any], row: dict[str, Any], pairs: dict[str, str]) -> None:
    for key, column in pairs.items():
        if row[column] is not None:
            keys[key] = row[column]


def _layout_keys(row: dict[str, Any]) -> dict[str, Any]:
    keys: dict[str, Any] = {"num_gpus": row["num_gpus"]}
    _set(keys, row, {
        "tensor_parallel": "tensor_parallel", "pipeline_parallel": "pipeline_parallel",
        "context_parallel": "context_parallel", "sequence_parallel": "sequence_parallel",
        "zero_stage": "zero_stage", "cp_comm_type": "cp_comm_type",
        "moe_router_max_nodes": "moe_router_max_nodes", "fp8_dispatch": "fp8_dispatch",
        "tp_comm_overlap": "tp_comm_overlap",
    })  # fmt: skip
    keys["expert_parallel"] = (row["expert_parallel"] or 1) if row["num_experts"] else 1
    if row["num_experts"] and row["expert_tensor_parallel"] is not None:  # MoE parallel folding
        keys["expert_tensor_parallel"] = row["expert_tensor_parallel"]
    if row["pipeline_schedule"] == "dualpipe":
        keys["ep_overlap"] = "dualpipe"
    for counted in (row["pipeline_split"] or "").split("+"):
        if counted:  # Megatron-LM's account_for_embedding/loss_in_pipeline_split
            keys[f"{counted}_in_pipeline_split"] = True
    return keys


def _batch_keys(row: dict[str, Any]) -> dict[str, Any]:
    keys = {
        "samples_per_step": row["global_batch_samples"],
        "seq_len": row["seq_len"],
        "mean_tokens_per_sample": row["seq_len"],
        "batching": "padded",
    }
    _set(keys, row, {"micro_batch": "micro_batch"})
    return keys


def _convention_keys(row: dict[str, Any]) -> dict[str, Any]:
    keys: dict[str, Any] = {"fp8": "none" if row["fp8"] == "none" else "hybrid"}
    _set(keys, row, {
        "recompute": "recompute", "fp8_activations": "fp8_activations",
        "attention_kernel": "attention_kernel", "attention_flops": "attention_flops",
        "grad_bytes": "grad_bytes", "dropout": "dropout",
    })  # fmt: skip
    if row["recompute_modules"]:
        keys["recompute_modules"] = list(row["recompute_modules"])
    return keys


def schedule_keys(row: dict[str, Any], fields: Any = None) -> dict[str, Any]:
    """The pipeline schedule as issue 20's scenario keys, where the scenario has them
    (``pipeline_schedule`` in ``fields``, default ``costmodel.inputs.scenario.FIELDS``; else
    nothing): ``interleaved`` with ``virtual_pipeline`` where the row gives V >= 2,
    ``dualpipe``, else ``1f1b``. An interleaved schedule whose V the source does not print
    (the Korthikanti rows as Calculon encodes them, one torchtitan row) is passed as ``1f1b``:
    its bubble an upper bound, its micro batches in flight a lower bound (costmodel's memory
    model holds p + (p - 1)/v for interleaving, more than 1F1B's p). Llama 3's V is read from
    the paper's split (its notes: one layer a chunk, the embedding and the loss counted as
    layers, `pipeline_split`). With PP 1 the schedule is moot."""
    if fields is None:
        from costmodel.inputs.scenario import FIELDS as fields
    if "pipeline_schedule" not in fields:
        return {}
    schedule = (row["pipeline_schedule"] or "").split(" ")[0]
    virtual = row["virtual_pipeline"]
    if schedule == "interleaved" and virtual and virtual >= 2:
        return {"pipeline_schedule": "interleaved", "virtual_pipeline": virtual}
    if schedule == "dualpipe":
        return {"pipeline_schedule": "dualpipe"}
    return {"pipeline_schedule": "1f1b"}


@dataclass(frozen=True)
class Stated:
    """The scenario `framework` a CSV `framework` is run as (costmodel.inputs.frameworks), whether
    the row's `date` dates its options (`frameworks.offer(name, as_of)`), why this entry where
    it is not the framework's own, and what the run's framework has beyond it ((key, value) of
    the plan's constraints)."""

    framework: str
    dated: bool = True
    why: str = ""
    adds: tuple[tuple[str, Any], ...] = ()


_MEGATRON_CORE = Stated("megatron", why="NeMo and Megatron-Bridge train with Megatron-Core")
_TITAN = Stated("torchtitan")
_SP = Stated("huggingface_sp")
#: Each value of the CSV's `framework` column (every row's is here: tests/benchmarks).
FRAMEWORKS: dict[str, Stated] = {
    "llm-foundry / Composer FSDP": Stated("composer"),
    "NeMo 24.12 (Megatron-Core)": _MEGATRON_CORE,
    "NeMo 2 (Megatron-Core)": _MEGATRON_CORE,
    "Megatron-Bridge (Megatron-Core)": _MEGATRON_CORE,
    "Megatron-LM": Stated("megatron"),
    "Megatron-LM (Megatron-Core r0.8.0)": Stated("megatron"),
    "Megatron-DeepSpeed (BF16Optimizer = ZeRO-1)": Stated(
        "megatron",
        why="DeepSpeed's fork of Megatron-LM: Megatron-LM's options of the date, and DeepSpeed's "
        "ZeRO-1 (its BF16Optimizer) before Megatron-LM's distributed optimizer",
        adds=(("zero_stage", 1),),
    ),
    "torchtitan": _TITAN,
    "torchtitan (FSDP2)": _TITAN,
    "torchtitan (FSDP2 + TP)": _TITAN,
    "torchtitan + torch.compile": _TITAN,
    "torchtitan + torch.compile (FSDP2)": _TITAN,
    "torchtitan + torch.compile (FSDP2 + TP)": _TITAN,
    "XTuner (mmengine + DeepSpeed, HF transformers)": _SP,
    "EasyContext (HF transformers + accelerate + DeepSpeed ZeRO-3 offload)": _SP,
    "meta-internal (4D parallelism: TP, CP, PP, FSDP)": Stated(
        "torchtitan",
        dated=False,
        why="Meta's own stack is not public; torchtitan, Meta's open trainer, offers the four "
        "dimensions the paper names (FSDP sharding, TP with SP, CP, PP with interleaving). "
        "Undated: torchtitan's dates are not the internal stack's (the 131K run had CP in 2024, "
        "before torchtitan did)",
    ),
    "HAI-LLM": Stated(
        "megatron",
        dated=False,
        why="DeepSeek's framework is not public; the run's options (PP, EP, ZeRO-1, selective "
        "recompute, FP8, no TP) are Megatron-Core's, and its DualPipe schedule is searched as "
        "the scenario's own. Undated: Megatron-LM's dates are not HAI-LLM's",
    ),
}


def stated(row: dict[str, Any]) -> Stated:
    """The row's framework as a scenario's (FRAMEWORKS); ValueError naming a row whose
    `framework` is not there."""
    try:
        return FRAMEWORKS[row["framework"]]
    except KeyError:
        raise ValueError(f"{row['id']}: framework {row['framework']!r} is not mapped") from None


def plan_constraints(row: dict[str, Any]) -> dict[str, tuple]:
    """What the row's framework offered at the row's date, as `plan.search` constraints
    (`frameworks.plan_constraints(name, as_of)`), with what the run's framework adds."""
    framework = stated(row)
    as_of = row["date"] if framework.dated else None
    out = frameworks.plan_constraints(framework.framework, as_of)
    for key, value in framework.adds:
        if key in out and value not in out[key]:
            out[key] = tuple(sorted(out[key] + (value,)))
    return out


def overrides(row: dict[str, Any]) -> dict[str, Any]:
    """Scenario overrides for ``costmodel.inputs.scenario.resolve(overrides=...)``.

    - Model: ``model`` (a preset or a config path under the repository) when ``model_ref`` is
      set, with ``count_mtp`` when the run trains MTP layers; otherwise the shape keys (every
      layer full attention, ``num_kv_heads`` = ``num_heads`` when the source gives none: MHA;
      squared ReLU is passed as ``gelu``, a non-gated MLP of the same width and FLOPs).
    - Layout: GPUs, TP, PP, CP, EP (1 for a dense model), the experts' TP where the row states
      it (``expert_tensor_parallel``: MoE parallel folding), sequence parallelism, ZeRO stage and
      the communication settings the source states (``tp_comm_overlap`` where the run overlapped
      its TP collectives: published_runs.md, "TP communication overlap"); the pipeline schedule
      and virtual stages
      where the scenario has issue 20's keys (``schedule_keys``). ``data_parallel`` (costmodel
      derives it) and the throughput columns stay in the table.
    - Batch: ``samples_per_step`` = global batch, ``seq_len``, ``mean_tokens_per_sample`` =
      ``seq_len`` and ``batching: padded``: pre-training packs documents into full rows, so a
      row has no padding; ``padded`` counts attention over the whole row (B x s^2) as every
      source's FLOP formula does, while ``packed`` would count per document from real lengths
      no source publishes.
    - Conventions: recompute and its modules, ``fp8`` (``hybrid`` for any FP8 recipe: the one
      FP8 choice of the scenario; ``fp8`` in the table names the recipe), FP8 activation storage,
      attention kernel and count, gradient bytes.
    - ``framework``: the scenario's entry the row's framework is run as (``FRAMEWORKS``): what its
      layers save for backward and what the plan offers. The loss stays the course's
      (``cross_entropy: fused``; no source prints its own): torchtitan's eager loss would keep
      fp32 copies of the logits its compiled one does not.
    - ``step_time`` from ``step_time(row)`` (printed, or derived from tokens/s or TFLOP/s as it
      says), ``measured_tokens_per_s`` the job's tokens/s where the source prints one (else
      null, so the course's figure does not leak in).
    An empty cell sets nothing: the course's value applies (recompute full, micro batch 1, TP,
    PP, CP 1, ZeRO 1, no sequence parallelism), which the row's ``assumed`` column names.
    """
    seconds, _how = step_time(row)
    name = f"{row['model']} on {row['num_gpus']} x {row['gpu']} ({row['id']})"
    keys: dict[str, Any] = {"name": name, "gpu": row["gpu"], "framework": stated(row).framework}
    keys.update(_model_keys(row))
    keys.update(_layout_keys(row))
    keys.update(_batch_keys(row))
    keys.update(_convention_keys(row))
    keys.update(schedule_keys(row))
    if seconds is not None:
        keys["step_time"] = seconds
    keys["measured_tokens_per_s"] = cluster_tokens_per_s(row)
    return keys
