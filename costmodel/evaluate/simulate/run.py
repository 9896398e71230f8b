"""A team's own run: its parallel layout, the memory of its most loaded GPU, its communication
per step, and the levers ranked for that run.

Memory follows the ZeRO paper (arXiv:1910.02054) and Megatron-LM's theoretical-memory
convention for the model states (costmodel.derive.model_states) and the tensors each layer saves
for backward for the activations (costmodel.derive.activations, checked against a real
measurement in costmodel.validate_memory; the model is costmodel.evaluate.memory.gpu_memory, applied
here to a lever's changes, with the fit rules). Communication is costmodel.evaluate.communication.communication:
an upper bound when nothing overlaps. Every figure that rests on a value the course assumed
names the key (account["assumptions"] says which came from the course).
"""

from __future__ import annotations

import math
from typing import Any

from costmodel.derive import activations as act
from costmodel.derive import numeric, plain
from costmodel.derive.lanes import as_float, maximum
from costmodel.evaluate.communication.communication import Communication, Compute, communication
from costmodel.evaluate.memory.gpu_memory import (  # noqa: F401 (re-exported: the memory model)
    MEMORY_CONVENTION,
    MEMORY_SETTINGS,
    capacity,
    heaviest_stage,
    layer_kinds,
    layer_kwargs,
    layer_saved_sets,
    most_loaded,
    outside_layers,
    scenario_model_states,
    split_params,
    stage_activations,
)
from costmodel.evaluate.simulate import attention_core, compute_time, stage
from costmodel.inputs import attention_kernels, frameworks, hardware, what_if
from costmodel.inputs.scenario import Scenario, as_scenario, recompute_fractions
from costmodel.inputs.shape import ModelShape

#: What the compute a collective hides behind is (communication.compute.basis).
COMPUTE_BASIS = (
    "the step-time model's compute of the phase on the most loaded GPU (evaluate.simulate.compute_time: "
    "GEMMs at their roofline, the attention core at its kernel's efficiency, memory-bound work "
    "over HBM)"
)

#: Levers, by the names of the JSON.
LEVERS = (
    "packing",
    "selective_recompute",
    "recompute_off",
    "communication_overlap",
    "micro_batch",
    "attention_kernel",
    "load_balance",
    "pipeline_bubble",
    "chunked_cross_entropy",
    "recompute_modules",
    "tensor_parallel",
    "pipeline_parallel",
    "context_parallel",
    "fp8",
)


def micro_batches(sc: Scenario, micro_batch: int | None = None) -> float:
    """Micro batches per step on one pipeline, at the scenario's micro batch or the one given (a
    lever's): the step's rows of seq_len token slots over DP x micro_batch. Padded, a row is a
    sample: samples_per_step / (DP x micro_batch); packed, the documents fill rows of seq_len
    tokens: tokens_per_step / (seq_len x DP x micro_batch) (derive.communication.MICRO_BATCHES,
    as the scenario's micro_batches_per_step)."""
    sc = as_scenario(sc)
    return plain.micro_batches(
        sc.batching,
        samples=sc.samples_per_step,
        tokens=sc.tokens_per_step,
        seq_len=sc.seq_len,
        dp=sc.data_parallel,
        micro_batch=micro_batch or sc.micro_batch,
    )


def parallel(sc: Scenario) -> dict[str, Any]:
    """The layout: sizes, micro batches per step on one pipeline, and the 1F1B bubble."""
    pp = sc.pipeline_parallel
    m = sc.micro_batches_per_step
    bubble = (pp - 1) / (m + pp - 1) if pp > 1 else 0.0
    return {
        "tp": sc.tensor_parallel,
        "pp": pp,
        "cp": sc.context_parallel,
        "ep": sc.expert_parallel,
        "dp": sc.data_parallel,
        "sp": sc.sequence_parallel,
        "micro_batches": m,
        "micro_batches_divide": float(m).is_integer(),
        "pipeline_bubble": bubble,
        # the scenario's schedule (derive.step_time): its idle time as a share of the step
        "pipeline_schedule": sc.pipeline_schedule or "1f1b",
        "virtual_pipeline": sc.virtual_pipeline,
        "schedule_bubble": schedule_bubble(sc),
    }


def schedule_bubble(sc: Scenario) -> float:
    """The bubble of the scenario's pipeline schedule as a share of the step: b / (1 + b), b
    its idle time over the stage's compute (derive.step_time.BUBBLE_OVER_COMPUTE); 1F1B's is
    (p - 1) / (m + p - 1)."""
    idle = plain.bubble_over_compute(
        sc.pipeline_schedule or "1f1b",
        sc.pipeline_parallel,
        sc.micro_batches_per_step,
        sc.virtual_pipeline or 1,
    )
    return idle / (1 + idle)


def with_changes(
    sc: Scenario,
    *,
    recompute: str | None = None,
    micro_batch: int | None = None,
    logits_chunks: int = 1,
    **changes: Any,
) -> Scenario:
    """The scenario with a lever's changes that leave the layout alone (not resolved again):
    another recompute policy (its modules or layer count dropped where they no longer apply),
    micro batch (the micro batches per step follow), chunked cross-entropy in ``logits_chunks``
    pieces, or any memory setting (``changes``: scenario keys)."""
    sc = as_scenario(sc)
    new: dict[str, Any] = dict(changes)
    if recompute is not None:
        modules = changes.get("recompute_modules", sc.recompute_modules)
        if recompute != "selective" and "recompute_modules" not in changes:
            modules = None
        if recompute == "selective" and modules is None:
            modules = list(act.DEFAULT_RECOMPUTE_MODULES)
        layers = changes.get("recompute_num_layers", sc.recompute_num_layers)
        if recompute != "full" and "recompute_num_layers" not in changes:
            layers = None
        new.update(recompute=recompute, recompute_modules=modules, recompute_num_layers=layers)
    if micro_batch is not None:
        new.update(micro_batch=micro_batch, micro_batches_per_step=micro_batches(sc, micro_batch))
    if logits_chunks > 1:
        new.update(cross_entropy="chunked", ce_chunks=logits_chunks)
    return sc.replace(**new) if new else sc


def memory(
    sc: Scenario,
    shape: ModelShape | None = None,
    *,
    recompute: str | None = None,
    micro_batch: int | None = None,
    logits_chunks: int = 1,
    virtual_stages: int | None = None,
    fit: bool = False,
    **changes: Any,
) -> dict[str, Any]:
    """Bytes on the most loaded GPU (the first or last pipeline stage), by phase: weights,
    gradients and optimizer states by ZeRO stage; the activations of the stage's layers times
    the micro batches 1F1B keeps in flight; the logits while the loss runs; the layer recompute
    rebuilds in the backward (derive.memory.phases). The peak, the largest phase, against the
    card's usable bytes. A lever's changes (``with_changes``) are applied first; ``fit``: a run
    that does not fit gets the changes that make it fit (``fit_changes``)."""
    sc = with_changes(
        sc, recompute=recompute, micro_batch=micro_batch, logits_chunks=logits_chunks, **changes
    )
    shape = shape or sc.shape
    out = most_loaded(sc, shape, micro_batches(sc, sc.micro_batch), virtual_stages)
    if fit and not out["fits"]:
        out["fit"] = fit_changes(sc, shape)
    return out


def _attention_forward(sc: Scenario) -> float:
    """The attention core's forward FLOPs of the step at the real lengths (derive.attention)."""
    return attention_core.core_forward_flops(sc)


def _step_work(sc: Scenario, fractions: dict[str, Any], core_forward: float) -> float:
    """Hardware FLOPs of the step's weight GEMMs and attention core under recompute fractions."""
    kappa = float(numeric.KERNEL_BACKWARD_OVER_FORWARD[attention_kernels.KIND[sc.attention_kernel]])
    six_nd = 6 * sc.activated_params * sc.tokens_per_step
    return six_nd * (1 + fractions["weights"] / 3) + core_forward * (1 + fractions["core"] + kappa)


def candidates(
    sc: Scenario, shape: ModelShape, offered: bool = True
) -> list[tuple[str, dict, str]]:
    """(what changes, the scenario keys it sets, a note) for each change that lowers the peak;
    `offered`: only those the scenario's framework offers (inputs.frameworks.refusal: no ZeRO-3
    under Megatron-LM, no TP or selective recompute under Trainer with DeepSpeed). The levers
    take them all and say which the framework lacks."""
    found = _lowering(sc, shape)
    if not offered:
        return found
    return [c for c in found if frameworks.refusal(sc.framework, c[1]) is None]


def _lowering(sc: Scenario, shape: ModelShape) -> list[tuple[str, dict, str]]:
    """Every change `candidates` considers, whatever the framework offers."""
    out: list[tuple[str, dict, str]] = []
    policy = sc.recompute
    if policy != "full":
        have = list(sc.recompute_modules or []) if policy == "selective" else []
        modules = list(have)
        for module in act.recompute_modules_of(shape):  # cheapest first (the model's modules)
            if module in modules:
                continue
            modules = modules + [module]
            ordered = [m for m in act.RECOMPUTE_MODULES if m in modules]
            keys = {"recompute": "selective", "recompute_modules": ordered}
            out.append((f"recompute_modules {', '.join(ordered)}", keys, "selective recompute"))
        out.append(("recompute full", {"recompute": "full"}, "every layer, one at a time"))
    ce = sc.cross_entropy
    for option in ("chunked", "fused", "fused_linear"):
        if act.CROSS_ENTROPY.index(option) > act.CROSS_ENTROPY.index(ce) or ce == "fp32":
            if option != ce:
                note = f"{sc.ce_chunks} chunks" if option == "chunked" else "no extra FLOPs"
                out.append((f"cross_entropy {option}", {"cross_entropy": option}, note))
    storage = [("moe_inputs", shape.is_moe), ("linear_inputs", True)]
    for option, applies in storage:
        now = act.FP8_ACTIVATIONS.index(sc.fp8_activations)
        if applies and act.FP8_ACTIVATIONS.index(option) > now:
            keys = {"fp8": "hybrid", "fp8_activations": option}
            out.append((f"fp8_activations {option}", keys, "FP8 training (fp8: hybrid)"))
    for zero in range(sc.zero_stage + 1, 4):
        out.append((f"zero_stage {zero}", {"zero_stage": zero}, "more DP communication"))
    if sc.micro_batch > 1:
        half = sc.micro_batch // 2
        out.append((f"micro_batch {half}", {"micro_batch": half}, "more micro batches per step"))
    for key, label in (
        ("tensor_parallel", "TP"),
        ("pipeline_parallel", "PP"),
        ("context_parallel", "CP"),
    ):
        doubled = 2 * sc.values[key]
        keys = {key: doubled}
        change = f"{key} {doubled}"
        if key == "tensor_parallel":
            keys["sequence_parallel"] = True
            if not sc.sequence_parallel:  # the label names every key the change sets
                change += ", sequence_parallel true"
        out.append((change, keys, f"{label} x 2: DP halves, more communication"))
    return out


#: Scenario keys a scenario's inputs leave out when the plan resolves it again
#: (evaluate.plan.plan_base._inputs): the name, and the lengths file (its path given again apart).
NOT_INPUTS = ("name", "sequence_lengths")


def drop_unused_inputs(data: dict[str, Any]) -> None:
    """In place, the input keys a scenario resolved again must not carry: those the recompute
    policy does not take, and sequence parallelism without TP (the plan's inputs; the what-if
    path clears the same keys: costmodel.inputs.what_if)."""
    policy = data["recompute"]
    if policy != "selective":
        data.pop("recompute_modules", None)
    if policy != "full":
        data.pop("recompute_num_layers", None)
        data.pop("recompute_method", None)
    if data["tensor_parallel"] == 1:
        data["sequence_parallel"] = False


def variant(sc: Scenario, changes: dict[str, Any]) -> Scenario | None:
    """The scenario with ``changes``, derived again from it (`Scenario.what_if`: the layout
    checked, DP derived, an EP nobody set fitted to it), or None where the validator refuses
    it (a layout that does not divide; `variant_or_reason` says why)."""
    return variant_or_reason(sc, changes)[0]


def variant_or_reason(sc: Scenario, changes: dict[str, Any]) -> tuple[Scenario | None, str | None]:
    """(`variant`, None), or (None, the validator's one-line reason) where it is refused."""
    return what_if.refusal(as_scenario(sc), changes)


def fit_changes(sc: Scenario, shape: ModelShape) -> list[dict[str, Any]]:
    """The changes that make a run fit, each evaluated by running this memory model on the
    changed scenario (its peak), ranked by the hardware FLOPs they add (recompute redoes
    forwards; the others add none, and are ranked by their peak). Changes that do not fit on
    their own follow, lowest peak first, when none does."""
    core_forward = _attention_forward(sc)
    work_now = _step_work(sc, recompute_fractions(sc.values), core_forward)
    found = []
    for label, changes, note in candidates(sc, shape):
        changed = variant(sc, changes)
        if changed is None:
            continue
        got = memory(changed)
        fractions = {  # as resolution derived them for the changed policy
            "weights": changed.recompute_weights_fraction,
            "core": changed.recompute_core_fraction,
        }
        work = _step_work(changed, fractions, core_forward)
        found.append(
            {
                "change": label,
                "set": changes,
                "peak": got["total"],
                "peak_phase": got["peak_phase"],
                "fits": got["fits"],
                "flop_cost": max(0.0, work / work_now - 1),
                "note": note,
            }
        )
    # of the growing module sets, the first that fits (the next ones only add FLOPs)
    chain = [x for x in found if x["change"].startswith("recompute_modules")]
    keep = next((x for x in chain if x["fits"]), chain[-1] if chain else None)
    found = [x for x in found if x not in chain or x is keep]
    fitting = sorted((x for x in found if x["fits"]), key=lambda x: (x["flop_cost"], x["peak"]))
    if fitting:
        return fitting
    return sorted(found, key=lambda x: x["peak"])[:3]


def compute_seconds(sc: Scenario, shape: ModelShape | None = None) -> Compute:
    """The compute one GPU of the most loaded stage runs per step that collectives can hide
    behind: the forward, the backward (recompute included) and, within both, the attention
    core, as the step-time model predicts them (evaluate.simulate.compute_time: each GEMM at its
    roofline, the attention core at its kernel's efficiency, the memory-bound work over HBM).
    The one place the communication model asks how long compute takes."""
    computed = compute_time.compute(sc, shape)
    return hiding_compute(computed["phases"], computed["shared_expert_seconds"])


def hiding_compute(phases: dict, shared_expert: float) -> Compute:
    """The Compute of compute_time's phases and the shared expert's seconds
    (compute_time.shared_expert_seconds): the report's, the prediction's and the plan's."""
    return Compute(**phases, basis=COMPUTE_BASIS, shared_expert=shared_expert)


def comm(
    sc: Scenario, shape: ModelShape | None = None, compute: Compute | None = None
) -> dict[str, Any]:
    """The collectives of a step (evaluate.communication.communication) for the scenario's layout, the exposed
    communication after the overlap rules, and the share conclusions use: the team's measured
    `communication_share` if given, else the estimate (`share`, the upper bound: nothing
    overlapped; `exposed_share` beside it)."""
    sc = as_scenario(sc)
    out = communication_of(sc, shape, compute).as_dict()
    measured = sc.communication_share
    out["estimated_share"] = out["share"]
    out["basis"] = "measured" if measured is not None else "estimated"
    out["share_used"] = measured if measured is not None else out["estimated_share"]
    return out


def communication_of(
    sc: Scenario, shape: ModelShape | None = None, compute: Compute | None = None
) -> Communication:
    """The Communication of the scenario's layout (`comm` without its dict: the plan reads
    `exposed_seconds` of many layouts)."""
    shape = shape or sc.shape
    return communication(
        **communication_args(sc, shape), compute=compute or compute_seconds(sc, shape)
    )


def communication_args(sc: Scenario, shape: ModelShape) -> dict[str, Any]:
    """evaluate.communication.communication's arguments for the scenario's layout, all but the compute."""
    gpu = hardware.GPUS[sc.gpu]
    intra, inter = hardware.link_bandwidths(
        gpu, sc.gpus_per_node, sc.intra_node_bandwidth, sc.inter_node_bandwidth
    )
    mtp = sc.num_mtp_layers  # counted (count_mtp): each a full layer
    experts = stage.routed_experts(shape, mtp)  # an MTP layer's routed experts are experts too
    return dict(
        dp=sc.data_parallel,
        tp=sc.tensor_parallel,
        pp=sc.pipeline_parallel,
        cp=sc.context_parallel,
        ep=sc.expert_parallel,
        sp=sc.sequence_parallel,
        zero_stage=sc.zero_stage,
        grad_bytes=sc.grad_bytes,
        gpus_per_node=sc.gpus_per_node,
        intra_node_bandwidth=intra,
        inter_node_bandwidth=inter,
        micro_batch=sc.micro_batch,
        seq_len=sc.seq_len,
        hidden_size=shape.hidden_size,
        num_layers=shape.num_layers + mtp,
        num_full_attention_layers=shape.num_full_attention_layers + mtp,
        num_moe_layers=shape.num_moe_layers + (mtp if shape.is_moe else 0),
        experts_per_token=shape.experts_per_token,
        num_heads=shape.num_heads,
        num_kv_heads=shape.num_kv_heads,
        head_dim=shape.qk_head_dim,
        v_head_dim=shape.v_head_dim,
        dense_params=maximum(as_float(sc.total_params) - experts, 1.0),
        expert_params=experts,
        micro_batches=max(1, math.ceil(micro_batches(sc) - 1e-9)),
        step_time=sc.step_time,
        full_recompute=sc.recompute == "full",
        cp_comm_type=sc.cp_comm_type,
        collective_latency=sc.collective_latency,
        moe_router_max_nodes=sc.moe_router_max_nodes,
        moe_router_max_devices=sc.moe_router_max_devices,
        fp8_dispatch=sc.fp8_dispatch,
        tp_comm_overlap=sc.tp_comm_overlap,
        overlap_grad_reduce=sc.overlap_grad_reduce,
        overlap_param_gather=sc.overlap_param_gather,
        ep_overlap=sc.ep_overlap,
        ep_overlap_fraction=sc.ep_overlap_fraction,
        moe_shared_expert_overlap=sc.moe_shared_expert_overlap,
        **_folding(sc, shape),
    )


def _folding(sc: Scenario, shape: ModelShape) -> dict[str, Any]:
    """communication's MoE parallel folding arguments, where the scenario states
    expert_tensor_parallel: the experts' TP, and whether the MoE layers keep TP collectives
    (not with ETP 1 and no shared expert, whose MLP runs on the layers' TP group)."""
    etp = sc.expert_tensor_parallel
    if etp is None or not shape.is_moe:
        return {}
    shared = bool(shape.shared_expert_intermediate_size)
    return {"etp": etp, "moe_tp_collectives": etp > 1 or shared}
