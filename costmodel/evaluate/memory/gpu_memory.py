"""The memory model of a run: the bytes on its most loaded GPU, by phase (costmodel.evaluate.simulate.run.
memory applies a lever's changes and the fit rules around it).

Model states after the ZeRO paper (arXiv:1910.02054) and Megatron-LM's theoretical-memory
convention (costmodel.derive.model_states); the tensors each layer saves for backward
(costmodel.derive.activations, checked against a real measurement in
costmodel.validate_memory); the phases and their peak (costmodel.derive.memory).
"""

from __future__ import annotations

import functools
import math
from typing import Any

from costmodel.derive import activations as act
from costmodel.derive.lanes import as_float, maximum
from costmodel.derive.memory import peak, phases
from costmodel.derive.plain import model_state_bytes, optimizer_state_bytes, zero3_gathered_bytes
from costmodel.evaluate.memory.pipeline import (
    SCHEDULE_CONVENTION,
    pipeline_stages,
    schedule_flights,
    second_copies,
)
from costmodel.evaluate.simulate import stage
from costmodel.inputs import attention_kernels, hardware
from costmodel.inputs.assumptions import assumed
from costmodel.inputs.layout import expert_split
from costmodel.inputs.scenario import Scenario, as_scenario
from costmodel.inputs.shape import ModelShape

#: What the memory model counts, and what it leaves out (in the JSON as memory.convention).
MEMORY_CONVENTION = (
    "peak by phase (forward end, loss, backward, optimizer step), the largest of them, on the "
    "most loaded GPU: model states after the ZeRO paper; the tensors each layer saves for "
    "backward under memory.settings (framework, cross_entropy, recompute and its modules, FP8 "
    "storage, attention kernel), times the micro batches 1F1B holds; the layer recompute "
    "rebuilds and the gradients at its boundary in the backward; the logits while the loss "
    "runs. Capacity: the card's CUDA total minus memory_reserve. Not counted: the transient "
    "buffers inside one operation (a GEMM's workspace, a kernel's scratch), CPU offload, "
    "FP8 weight copies, the communication buffers beyond memory_reserve"
)
#: Layers ZeRO 3 gathers ahead of the one computing (derive.model_states.zero3_gathered: PyTorch
#: FSDP2's default, two all-gather outputs alive at once; pytorch/pytorch PR #128884).
ZERO3_PREFETCH_LAYERS = 1
#: What the memory model adds under ZeRO 3 (memory.convention, appended where zero_stage is 3).
ZERO3_CONVENTION = (
    "; ZeRO 3: the gathered weights of the largest layer and of the next one (prefetched) and "
    "the layer's unsharded gradients, beside the sharded states"
)
#: The keys memory.settings names (each a scenario key; what a figure of the memory rests on).
MEMORY_SETTINGS = (
    "framework",
    "cross_entropy",
    "ce_chunks",
    "recompute",
    "recompute_modules",
    "recompute_num_layers",
    "recompute_method",
    "fp8",
    "fp8_activations",
    "attention_kernel",
    "memory_reserve",
)


def split_params(shape: ModelShape, sc: Scenario) -> dict[str, float]:
    """Parameters of the scenario split as the layout divides them; the routed experts with
    those of its trained MTP layers (stage.routed_experts)."""
    parts = shape.breakdown
    experts = stage.routed_experts(shape, sc.num_mtp_layers)
    embedding, head = as_float(parts["embedding"]), as_float(parts["lm_head"])
    dense = maximum(as_float(sc.total_params) - experts - embedding, 0.0)
    if not shape.tie_word_embeddings:
        dense = max(dense - head, 0.0)
    return {"experts": experts, "embedding": embedding, "lm_head": head, "layers": dense}


def layer_kinds(shape: ModelShape, sc: Scenario) -> list[tuple[str, str, int]]:
    """(mixer, mlp, count) of the model's layer kinds, MTP layers counted when they are
    (evaluate.simulate.stage.layer_kinds)."""
    return list(stage.layer_kinds(shape, sc.num_mtp_layers))


def layer_kwargs(shape: ModelShape, sc: Scenario, b: int) -> dict[str, Any]:
    return {
        "b": b,
        "s": sc.seq_len,
        "hidden": shape.hidden_size,
        "heads": shape.num_heads,
        "kv_heads": shape.num_kv_heads,
        "head_dim": shape.qk_head_dim,
        "v_head_dim": shape.v_head_dim,
        "qk_norm": shape.qk_norm,
        "q_lora_rank": shape.q_lora_rank,
        "kv_lora_rank": shape.kv_lora_rank,
        "ffn": shape.intermediate_size,
        "mlp_activation": shape.mlp_activation,
        "experts": shape.num_experts,
        "top_k": shape.experts_per_token,
        "moe_ffn": shape.moe_intermediate_size,
        "shared_ffn": shape.shared_expert_intermediate_size,
        "router_fp32": shape.router_fp32,
        "routing_weights_fp32": shape.routing_weights_fp32,
        "shared_gate": shape.shared_expert_gate,
        "output_gate": shape.attention_output_gate,
        "norm_offset": shape.rmsnorm_offset,
        "norm_topk": shape.norm_topk,
        "linear_key_heads": shape.linear_num_key_heads,
        "linear_value_heads": shape.linear_num_value_heads,
        "linear_key_head_dim": shape.linear_key_head_dim,
        "linear_value_head_dim": shape.linear_value_head_dim,
        "conv_kernel": shape.linear_conv_kernel_dim,
        "chunk": assumed("linear_attention_chunk"),  # the FLOPs' chunk (evaluate.simulate.linear)
        "attention_kernel": attention_kernels.KIND[sc.attention_kernel],  # flash or eager
        "framework": sc.framework,
        "dropout": sc.dropout,
        "fp8_activations": sc.fp8_activations,
        "cp": sc.context_parallel,
    }


def heaviest_stage(kinds: list[tuple[dict[str, float], int]], pp: int, room=None) -> list[dict]:
    """The layers of the most loaded stage (evaluate.simulate.stage.heaviest_stage; `room` layers
    for a stage of an uneven split), each kind's bytes per layer (a dict) weighed by their sum."""
    weights = [sum(per_layer.values()) for per_layer, _ in kinds]
    runs = stage.heaviest_stage(weights, [count for _, count in kinds], pp, room)
    return [kinds[kind][0] for kind, n in runs for _ in range(n)]


def layer_saved_sets(shape: ModelShape, sc: Scenario):
    """Per layer kind: (kept per micro batch, the whole set, count) on one GPU, by the recompute
    policy and its modules (full recompute: the layer's input)."""
    tp, sp = sc.tensor_parallel, sc.sequence_parallel
    kwargs = layer_kwargs(shape, sc, sc.micro_batch)
    policy = sc.recompute
    kinds = []
    for mixer, mlp, count in layer_kinds(shape, sc):
        if mixer == "gated_deltanet" and not shape.linear_num_value_heads:
            continue
        whole = act.layer_activation_bytes(mixer, mlp, tp=tp, sp=sp, recompute="none", **kwargs)
        kept = act.layer_activation_bytes(
            mixer,
            mlp,
            tp=tp,
            sp=sp,
            recompute=policy,
            recompute_modules=sc.recompute_modules,
            **kwargs,
        )
        kinds.append((kept, whole, count))
    return kinds


def stage_activations(kinds, sc: Scenario, room: int | None = None) -> tuple[float, float]:
    """(bytes one micro batch leaves saved on the most loaded stage, the working set the
    backward rebuilds at once): full recompute keeps a layer's input per group of
    recompute_num_layers (uniform) and rebuilds a group, or recomputes the first
    recompute_num_layers of the stage (block) and keeps the others whole; selective recompute
    rebuilds the recomputed modules of one layer. `room`: the stage's layers under an uneven
    split (stage.stage_sizes), else ceil(L / PP)."""
    sized = [({"whole": sum(whole.values())}, sum(kept.values()), n) for kept, whole, n in kinds]
    chosen = heaviest_stage([(size, n) for size, _, n in sized], sc.pipeline_parallel, room)
    kept_of = {id(size): kept for size, kept, _ in sized}
    layers = [(kept_of[id(size)], size["whole"]) for size in chosen]  # heaviest first
    policy, group = sc.recompute, sc.recompute_num_layers
    largest = max((whole for _, whole in layers), default=0.0)
    if policy == "full" and sc.recompute_method == "block" and group is not None:
        recomputed = min(group, len(layers))  # the lightest layers: the heaviest stay whole
        saved = sum(kept for kept, _ in layers[len(layers) - recomputed :])
        saved += sum(whole for _, whole in layers[: len(layers) - recomputed])
        working = max((whole for _, whole in layers[len(layers) - recomputed :]), default=0.0)
        return saved, working
    if policy == "full":
        group = group or 1
        inputs = math.ceil(len(layers) / group)
        saved = sum(kept for kept, _ in layers[:inputs])
        return saved, largest * min(group, len(layers))
    saved = sum(kept for kept, _ in layers)
    if policy == "selective":
        return saved, max((whole - kept for kept, whole in layers), default=0.0)
    moved = offloaded(layers, offload_layers(sc))
    # the offloaded layers' tensors wait on the host; one comes back for its backward at a time
    return saved - sum(moved), max(moved, default=0.0)


def offload_layers(sc) -> int:
    """The layers whose saved tensors go to host memory (cpu_offload_layers): Megatron-LM
    offloads only without recompute and without a pipeline (TransformerConfig refuses either
    with --cpu-offloading), so a lever that turns recompute on, or the plan's layouts (which
    read no cpu_offload_layers), keep every layer's tensors on the GPU."""
    if sc.recompute != "none" or sc.pipeline_parallel != 1:
        return 0
    return getattr(sc, "cpu_offload_layers", 0)


def offloaded(layers: list[tuple[float, float]], n: int) -> list[float]:
    """The bytes per micro batch of each offloaded layer among the stage's `layers` ((kept,
    whole), heaviest first): the `n` lightest (an upper bound on what stays on the GPU;
    Megatron-LM offloads the first n of the model's layers, alike but for DeepSeek-style dense
    first layers)."""
    n = min(n, max(len(layers) - 1, 0))  # the last layer's tensors never leave
    return [kept for kept, _ in layers[len(layers) - n :]] if n else []


def offload_bytes(shape: ModelShape, sc: Scenario) -> list[float]:
    """Each offloaded layer's saved bytes per micro batch on the most loaded GPU (`offloaded`
    of the stage's layers; empty without offloading)."""
    n = offload_layers(sc)
    if not n:
        return []
    kinds = layer_saved_sets(shape, sc)
    sized = [({"kept": sum(kept.values())}, n_kind) for kept, _, n_kind in kinds]
    chosen = heaviest_stage(sized, sc.pipeline_parallel)
    return offloaded([(size["kept"], size["kept"]) for size in chosen], n)


def outside_layers(shape: ModelShape, sc: Scenario) -> tuple[dict[str, float], float]:
    """Bytes outside the layers per micro batch (token ids, RoPE, final norm, lm_head input),
    and the logits the loss keeps (cross_entropy)."""
    tp, sp, cp = sc.tensor_parallel, sc.sequence_parallel, sc.context_parallel
    b, s = sc.micro_batch, sc.seq_len
    framework = act.FRAMEWORKS[sc.framework]
    outside = act.model_activation_bytes(
        b=b,
        s=s,
        hidden=shape.hidden_size,
        vocab=shape.vocab_size,
        elementwise=framework.elementwise,
        loss_fp32=False,
        output_logits=False,
        tp=tp,
        sp=sp,
        cp=cp,
    )
    loss = act.loss_saved(
        b * s / cp,
        shape.vocab_size,
        cross_entropy=sc.cross_entropy,
        chunks=sc.ce_chunks,
        framework=sc.framework,
    )
    return outside, sum(act.per_gpu(loss, tp=tp, sp=sp).values())


def capacity(sc: Scenario) -> dict[str, Any]:
    """The bytes a run can use on one GPU: the card's CUDA total minus memory_reserve."""
    sc = as_scenario(sc)
    gpu = hardware.GPUS[sc.gpu]
    usable = gpu.cuda_memory_bytes - sc.memory_reserve
    return {
        "cuda_total": gpu.cuda_memory_bytes,
        "cuda_total_kind": gpu.cuda_memory_kind,
        "cuda_total_source": gpu.cuda_memory_source,
        "memory_reserve": sc.memory_reserve,
        "usable": usable,
    }


def stage_params(
    params: dict, shape: ModelShape, seq_len, tp, pp, cp, ep, micro_batch, sp, etp=None
):
    """The parameters a pipeline stage's GPU holds and its activation gradient: (the bytes of
    the gradients at a layer's boundary in the backward, dL/d(output) and dL/d(input) in BF16;
    the routed experts' parameters per GPU, split by ETP x EP x PP (`etp` None: TP); the
    parameters on the first and on the last stage's GPU). `params`: `split_params`; the sizes
    one layout's, or arrays over the plan's layouts."""
    tokens = micro_batch * seq_len / cp / stage.where(sp, tp, 1)
    gradients = 2 * 2 * tokens * shape.hidden_size
    head = stage.where(shape.tie_word_embeddings and pp == 1, 0, params["lm_head"])
    experts = params["experts"] / ((tp if etp is None else etp) * pp * ep)
    layer_params = params["layers"] / (tp * pp) + experts
    # the first stage holds the embedding, the last the lm_head (one stage all of it at p = 1)
    first = layer_params + params["embedding"] / tp + stage.where(pp == 1, head / tp, 0)
    last = layer_params + head / tp
    return gradients, experts, first, last


def gathered_layer(params: dict, shape: ModelShape, mtp: int, tp, ep, etp=None):
    """The parameters of the largest layer on one GPU before ZeRO 3 shards them: the layers'
    mean dense share over TP and, in an MoE layer, its routed experts over ETP x EP (what ZeRO
    3 gathers for the layer's forward and backward). `params`: `split_params`; the sizes one
    layout's, or arrays over the plan's layouts."""
    layers = shape.num_layers + mtp
    moe_layers = sum(shape.moe_layer_flags) + (mtp if shape.is_moe else 0)
    experts = params["experts"] / max(moe_layers, 1) / ((tp if etp is None else etp) * ep)
    return params["layers"] / max(layers, 1) / tp + experts


def model_states(
    dense, experts, zero: int, ranks, expert_ranks, grad_bytes, optimizer_bytes=12, layer=None
) -> dict:
    """Weights, gradients and optimizer states of one GPU (derive.model_states) at a ZeRO
    stage: the dense share sharded over `ranks` (DP x CP), the experts' over `expert_ranks`
    (their data-parallel group EDP, TP x CP x DP / (ETP x EP): inputs.layout.expert_split);
    `optimizer_bytes` Adam's per parameter (derive.plain.optimizer_state_bytes: 12 in fp32).
    The parameters may be arrays over the plan's layouts (the ranks one number). Under ZeRO 3,
    `gathered`: the working set of the gathered layer (`layer`: `gathered_layer`)."""
    kept = {"grad_bytes": grad_bytes, "optimizer_bytes": optimizer_bytes}
    states = model_state_bytes(dense, zero, ranks, **kept)
    expert_states = model_state_bytes(experts, zero, expert_ranks, **kept)
    out = {key: states[key] + expert_states[key] for key in states}
    if zero == 3 and layer is not None:
        out["gathered"] = zero3_gathered_bytes(layer, ZERO3_PREFETCH_LAYERS, grad_bytes=grad_bytes)
    return out


def stage_phases(states, activations, in_flight, has_head) -> dict[str, dict]:
    """The phases of a pipeline stage's GPU and their bytes (derive.memory.phases): its model
    states' bytes, `activations` (saved per micro batch, the backward's working set, the
    layers' outside per micro batch, the logits, the layer gradients: `stage_activations`,
    `outside_layers`, `stage_params`), the micro batches `in_flight`; the embedding's input and the
    loss where it holds the head (`has_head`: a bool, or an array over the plan's layouts, whose
    loss phase is then the forward's end where it holds none)."""
    saved, working, outside, logits, gradients = activations
    return phases(
        states,
        saved,
        stage.where(has_head, outside, 0.0),
        in_flight,
        logits=None if has_head is False else stage.where(has_head, logits, 0.0),
        working_set=working,
        layer_gradients=gradients,
    )


def peak_bytes(phase: dict[str, dict]):
    """The bytes of the largest phase (elementwise over the plan's layouts)."""
    return functools.reduce(stage.maximum, (p["bytes"] for p in phase.values()))


def most_loaded(
    sc: Scenario, shape: ModelShape, per_step: float, virtual_stages: int | None = None
) -> dict[str, Any]:
    """Bytes on the most loaded GPU (the first or last pipeline stage, or a middle one of an
    uneven split: evaluate.memory.pipeline) of the scenario as it is
    (costmodel.evaluate.simulate.run.memory applies a lever's changes first), `per_step` its micro
    batches per step on one pipeline, `virtual_stages` a lever's model chunks per stage; `fit`
    is None (run.memory fills it)."""
    tp, pp, cp, b = sc.tensor_parallel, sc.pipeline_parallel, sc.context_parallel, sc.micro_batch
    params = split_params(shape, sc)
    kinds = layer_saved_sets(shape, sc)
    outside, logits = outside_layers(shape, sc)
    sizes = (sc.seq_len, tp, pp, cp, sc.expert_parallel, b, sc.sequence_parallel)
    gradients, experts_on_gpu, first, last = stage_params(
        params, shape, *sizes, etp=sc.expert_tensor_parallel
    )
    # the micro batches each stage holds: the schedule's (`schedule_flights`); interleaved 1F1B
    # keeps more: the lever's chunks, else the scenario's
    chunks = virtual_stages or sc.virtual_pipeline or 1
    flights = schedule_flights(sc.pipeline_schedule or "1f1b", pp, per_step, chunks)
    stages = pipeline_stages(sc, shape, params, (first, last, experts_on_gpu), flights)
    copies = second_copies(
        sc,
        stages,
        lambda on_gpu, experts: scenario_model_states(sc, on_gpu - experts, experts)["weights"],
    )
    layer = gathered_layer(
        params, shape, sc.num_mtp_layers, tp, sc.expert_parallel, sc.expert_tensor_parallel
    )
    even = None
    best = None
    for name, (on_gpu, experts, room, flight, has_head) in stages.items():
        if room is None:  # the even split: one stage's layers for all (computed once)
            even = even or stage_activations(kinds, sc)
        saved, working = even if room is None else stage_activations(kinds, sc, room)
        activations = (saved, working, sum(outside.values()), logits, gradients)
        states = scenario_model_states(sc, on_gpu - experts, experts, layer)
        if name in copies:  # DualPipe: the weights of the stage it mirrors besides
            states["weights"] += copies[name]
        phase = stage_phases(sum(states.values()), activations, flight, has_head)
        top = peak(phase)
        if best is None or phase[top]["bytes"] > best["total"]:
            held_logits = phase[top]["contents"].get("logits", 0.0)
            best = {
                **states,
                "activations": phase[top]["bytes"] - sum(states.values()) - held_logits,
                "logits": logits if has_head else 0.0,
                "total": phase[top]["bytes"],
                "peak_phase": top,
                "phases": phase,
                "stage": name if pp > 1 else "only",
                "in_flight": flight,
                "params_on_gpu": on_gpu,
            }
    room = capacity(sc)
    out = {
        **best,
        "capacity": room["usable"],
        "capacity_detail": room,
        "headroom": room["usable"] - best["total"],
        "fits": best["total"] <= room["usable"],
        "recompute": sc.recompute,
        "micro_batch": b,
        "settings": {key: sc.values[key] for key in MEMORY_SETTINGS},
        "convention": offload_convention(sc)
        + (ZERO3_CONVENTION if sc.zero_stage == 3 else "")
        + (SCHEDULE_CONVENTION.get(sc.pipeline_schedule, "") if pp > 1 else ""),
        "framework_rules": act.FRAMEWORKS[sc.framework].text,
        "fit": None,
    }
    return out


def offload_convention(sc: Scenario) -> str:
    """MEMORY_CONVENTION, with the offloaded layers said where there are some."""
    n = offload_layers(sc)
    if not n:
        return MEMORY_CONVENTION
    return MEMORY_CONVENTION.replace("CPU offload, ", "") + (
        f"; the saved tensors of {n} offloaded layers (cpu_offload_layers) on the host, one "
        "brought back at a time for its backward"
    )


def scenario_model_states(
    sc: Scenario, dense: float, experts: float, layer: float | None = None
) -> dict[str, float]:
    """`model_states` of the scenario's ZeRO stage and sizes (`layer`: `gathered_layer`)."""
    ranks = sc.data_parallel * sc.context_parallel
    expert_ranks = max(
        expert_split(
            sc.tensor_parallel,
            sc.context_parallel,
            sc.data_parallel,
            sc.expert_parallel,
            sc.expert_tensor_parallel,
        )[1],
        1,
    )
    optimizer = optimizer_state_bytes(sc.optimizer_dtype, sc.main_params_dtype)
    return model_states(
        dense, experts, sc.zero_stage, ranks, expert_ranks, sc.grad_bytes, optimizer, layer
    )
