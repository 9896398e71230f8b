"""The parallel layout and the memory settings of a resolved scenario: the checks that it
divides (one line naming the keys when it does not), data_parallel, the effective
expert_parallel and the micro batches per step; the recompute fractions."""

from __future__ import annotations

import math
from typing import Any

from costmodel.derive import activations as act
from costmodel.derive import plain
from costmodel.errors import CostModelError
from costmodel.formats import shown
from costmodel.inputs import hardware
from costmodel.inputs.assumptions import fitted_expert_parallel
from costmodel.inputs.model_shape import scenario_shape, tensor_parallel_widths
from costmodel.records import frozen_dataclass


@frozen_dataclass
class Layout:
    """The parallel layout of a resolved scenario (Scenario.layout): the sizes, the pipeline
    schedule and the micro batches, ZeRO and the node size."""

    tensor_parallel: int
    pipeline_parallel: int
    virtual_pipeline: int | None
    pipeline_schedule: str
    context_parallel: int
    expert_parallel: int
    data_parallel: int
    micro_batch: int
    micro_batches_per_step: int | float
    sequence_parallel: bool
    zero_stage: int
    gpus_per_node: int


#: The scenario keys of Layout (each its attribute of the same name).
LAYOUT_KEYS = tuple(Layout.__dataclass_fields__)


def _layout_error(key: str, value: Any, allowed: str) -> CostModelError:
    return CostModelError(f"{key}: {shown(value)} is not allowed; expected {allowed}")


def _check_tensor_parallel(values: dict[str, Any], tp: int) -> None:
    """TP divides every width of the model that the GEMM list splits (the heads, the MLP and
    expert widths, the vocabulary, ...), of the shape the list uses: the model config, or the
    shape built from the keys (whose heads, with num_heads unset, are attention_dim / head_dim).
    So no GEMM of `costmodel gemms` has a fraction of a column or a head."""
    shape, source = scenario_shape(values)
    for what, width in tensor_parallel_widths(shape, values["num_mtp_layers"]):
        if width % tp:
            raise _layout_error(
                "tensor_parallel", tp, f"a divisor of {what} ({width:,}; shape from {source})"
            )


def _check_node_links(values: dict[str, Any]) -> None:
    """A node larger than the GPU's NVLink domain needs a bandwidth between its GPUs: the GPU
    table's PCIe figure where it has one, else the scenario's intra_node_bandwidth."""
    gpu, per_node = hardware.GPUS[values["gpu"]], values["gpus_per_node"]
    if values.get("intra_node_bandwidth") is None and gpu.intra_node_bandwidth(per_node) is None:
        raise _layout_error(
            "gpus_per_node",
            per_node,
            f"at most {gpu.nvlink_gpus} for {gpu.name} (its NVLink domain; the GPU table has no "
            "bandwidth for more GPUs in a node), or intra_node_bandwidth set",
        )


def _layout(values: dict[str, Any], sources: dict[str, str]) -> None:
    """Check the parallel layout and derive data_parallel, the effective expert_parallel and
    the micro batches per step: one line naming the keys when it does not divide.

    expert_parallel the team did not set is the course's 8, brought down to the largest size
    that divides the experts and DP (source `derived`); one the team set must divide them.
    A dense model has EP = 1."""
    tp, pp, cp = (values[k] for k in ("tensor_parallel", "pipeline_parallel", "context_parallel"))
    gpus = values["num_gpus"]
    if gpus % (tp * pp * cp):
        raise _layout_error(
            "num_gpus",
            gpus,
            f"a multiple of tensor_parallel x pipeline_parallel x context_parallel "
            f"({tp} x {pp} x {cp} = {tp * pp * cp})",
        )
    dp = gpus // (tp * pp * cp)
    values["data_parallel"] = dp
    sources["data_parallel"] = "derived"
    _check_node_links(values)
    heads = values.get("num_heads")
    if heads is not None and heads % tp:
        raise _layout_error("tensor_parallel", tp, f"a divisor of num_heads ({heads})")
    if tp > 1:
        _check_tensor_parallel(values, tp)
    if pp > values["num_layers"]:  # an uneven split is allowed (as Megatron-LM's layouts)
        raise _layout_error("pipeline_parallel", pp, f"at most num_layers ({values['num_layers']})")
    if values["seq_len"] % cp:
        raise _layout_error("context_parallel", cp, f"a divisor of seq_len ({values['seq_len']})")
    if values["sequence_parallel"] and tp == 1 and sources.get("sequence_parallel") != "course":
        raise _layout_error("sequence_parallel", True, "false when tensor_parallel is 1")
    if values["sequence_parallel"] and (values["seq_len"] // cp) % tp:
        raise _layout_error(
            "tensor_parallel",
            tp,
            f"a divisor of seq_len / context_parallel ({values['seq_len'] // cp:,}) with "
            "sequence_parallel (each TP rank holds its share of the tokens)",
        )
    experts, ep = values["num_experts"], values["expert_parallel"]
    team_ep = sources.get("expert_parallel") != "course"
    if experts == 0:
        if team_ep and ep != 1:
            raise _layout_error("expert_parallel", ep, "1 for a dense model (num_experts = 0)")
        values["expert_parallel"], sources["expert_parallel"] = 1, "derived"
    elif team_ep:
        if experts % ep or dp % ep:  # the EP ranks are data-parallel ranks
            raise _layout_error(
                "expert_parallel",
                ep,
                f"a divisor of num_experts ({experts}) and of data_parallel ({dp})",
            )
    else:
        fitted = fitted_expert_parallel(experts, dp, ep)
        if fitted != ep:
            values["expert_parallel"], sources["expert_parallel"] = fitted, "derived"
    # rows of seq_len slots per pipeline: padded, one sample a row; packed, documents fill rows
    values["micro_batches_per_step"] = plain.micro_batches(
        values["batching"],
        samples=values["samples_per_step"],
        tokens=values["tokens_per_step"],
        seq_len=values["seq_len"],
        dp=dp,
        micro_batch=values["micro_batch"],
    )
    sources["micro_batches_per_step"] = "derived"


def _module_params(values: dict[str, Any]) -> tuple[dict[str, float], float]:
    """Matmul parameters per token of each module whose recompute redoes weight GEMMs
    (`recompute.WEIGHT_MODULES`), from the scenario's shape, and the N they are a share of."""
    shape, _ = scenario_shape(values)
    parts = {key: float(value) for key, value in shape.breakdown.items()}
    up = 0.0
    if shape.mla:  # MLA's up-projections: q_b (from the query latent) and kv_b, per MLA layer
        nope = shape.qk_head_dim - shape.qk_rope_head_dim
        query = shape.q_lora_rank * shape.num_heads * shape.qk_head_dim if shape.q_lora_rank else 0
        kv = shape.kv_lora_rank * shape.num_heads * (nope + shape.v_head_dim)
        up = float(query + kv) * values["num_full_attention_layers"]
    params = float(shape.activated_params)
    if values["num_mtp_layers"]:
        params += float(shape.mtp_activated_params)
    modules = {
        "mlp": parts["dense_mlp"],
        "moe": parts["routed_experts_active"] + parts["router"] + parts["shared_experts"],
        "shared_experts": parts["shared_experts"],
        "mla_up_proj": up,
    }
    return modules, params


def recompute_fractions(
    values: dict[str, Any], policy: str | None = None, modules=None
) -> dict[str, Any]:
    """The weights and attention-core fractions recompute redoes (`recompute.fractions`) for the
    scenario's policy, or another (`policy`, with `modules` for selective: the scenario's, else
    Megatron-LM's default set), and where r comes from."""
    policy = policy or values["recompute"]
    if policy == "selective" and modules is None:
        modules = values.get("recompute_modules") or list(act.DEFAULT_RECOMPUTE_MODULES)
    stage_layers = math.ceil(values["num_layers"] / values["pipeline_parallel"])
    params, n = _module_params(values) if policy == "selective" else ({}, 1.0)
    full = policy == "full" and values["recompute"] == "full"
    return plain.fractions(
        policy,
        modules or (),
        params,
        n,
        selective_fraction=values.get("selective_recompute_fraction"),
        layers_share=plain.recomputed_layers(
            stage_layers,
            values.get("recompute_num_layers") if full else None,
            values["recompute_method"],
        ),
    )


def _schedule(values: dict[str, Any]) -> None:
    """virtual_pipeline goes with the interleaved schedule (at least 2 chunks, at most the
    stage's layers: chunks of unequal size are counted as equal)."""
    schedule, chunks = values["pipeline_schedule"], values.get("virtual_pipeline")
    if schedule == "interleaved" and chunks is None:
        raise _layout_error(
            "virtual_pipeline",
            chunks,
            "an integer of at least 2 with pipeline_schedule interleaved",
        )
    if schedule != "interleaved" and chunks is not None:
        raise _layout_error(
            "virtual_pipeline", chunks, "null unless pipeline_schedule is interleaved"
        )
    stage_layers = math.ceil(values["num_layers"] / values["pipeline_parallel"])
    if chunks is not None and chunks > stage_layers:
        raise _layout_error(
            "virtual_pipeline",
            chunks,
            f"at most the layers of a pipeline stage ({stage_layers}: num_layers / "
            "pipeline_parallel, rounded up)",
        )


def _memory_settings(values: dict[str, Any], sources: dict[str, str]) -> None:
    """The memory and recompute keys that go together: recompute_modules only with selective
    recompute (null: Megatron-LM's default set), recompute_num_layers (more than a stage's layers:
    all of them) and a team's recompute_method only with full, FP8 storage only with FP8 training, cross_entropy null
    the framework's; then the recompute fractions of the weights and of the attention core
    (`recompute.fractions`), derived."""
    policy = values["recompute"]
    if values.get("recompute_modules") is not None and policy != "selective":
        raise _layout_error(
            "recompute_modules", values["recompute_modules"], "null unless recompute is selective"
        )
    for key in ("recompute_num_layers", "recompute_method"):
        given = values.get(key) is not None and sources.get(key) != "course"
        if given and policy != "full":
            raise _layout_error(key, values[key], "unset unless recompute is full")
    if values["fp8_activations"] != "none" and values["fp8"] == "none":
        raise _layout_error(
            "fp8_activations", values["fp8_activations"], "none unless fp8 is hybrid"
        )
    if values.get("cross_entropy") is None:
        values["cross_entropy"] = act.FRAMEWORKS[values["framework"]].cross_entropy
        sources["cross_entropy"] = "derived"
    if policy == "selective" and values.get("recompute_modules") is None:
        values["recompute_modules"] = list(act.DEFAULT_RECOMPUTE_MODULES)
        sources["recompute_modules"] = "derived"
    _schedule(values)
    got = recompute_fractions(values)
    values["recompute_weights_fraction"] = got["weights"]
    values["recompute_core_fraction"] = got["core"]
    values["recompute_fraction_from"] = got["from"]
    for key in ("recompute_weights_fraction", "recompute_core_fraction", "recompute_fraction_from"):
        sources[key] = "derived"
