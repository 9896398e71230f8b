"""A team's own run: its parallel layout, the memory of its most loaded GPU, its communication
per step, and the levers ranked for that run.

Memory follows the ZeRO paper (arXiv:1910.02054) and Megatron-LM's theoretical-memory
convention for the model states (costmodel.derive.model_states) and the tensors each layer saves
for backward for the activations (costmodel.derive.activations, checked against a real
measurement in costmodel.validate_memory). Communication is costmodel.evaluate.communication:
an upper bound when nothing overlaps. Every figure that rests on a value the course assumed
names the key (account["assumptions"] says which came from the course).
"""

from __future__ import annotations

import math
from typing import Any

import sympy as sp

from costmodel.derive import activations as act
from costmodel.derive import communication as comm_forms
from costmodel.derive import symbols as sym
from costmodel.derive.model_states import model_state_bytes
from costmodel.evaluate.communication import Compute, communication
from costmodel.evaluate.shapes import scenario_shape
from costmodel.inputs import hardware
from costmodel.inputs.scenario import Scenario
from costmodel.inputs.shape import FULL_ATTENTION, ModelShape

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
)


#: What the memory model counts, and what it leaves out (in the JSON as memory.convention).
MEMORY_CONVENTION = (
    "activations: the tensors the Hugging Face implementation saves for backward, in BF16, with "
    "fused RMSNorm and SwiGLU (checked by make validate); not counted: FP8 activation storage, "
    "fused MoE permute/unpermute kernels, recompute of chosen modules only, CPU offload (each "
    "needs less), nor the allocator's fragmentation and the communication buffers (more)"
)


def micro_batches(values: dict[str, Any], micro_batch: int | None = None) -> float:
    """Micro batches per step on one pipeline, at the scenario's micro batch or the one given (a
    lever's): the step's rows of seq_len token slots over DP x micro_batch. Padded, a row is a
    sample: samples_per_step / (DP x micro_batch); packed, the documents fill rows of seq_len
    tokens: tokens_per_step / (seq_len x DP x micro_batch) (derive.communication.MICRO_BATCHES,
    as the scenario's micro_batches_per_step)."""
    return comm_forms.micro_batches(
        values["batching"],
        samples=values["samples_per_step"],
        tokens=values["tokens_per_step"],
        seq_len=values["seq_len"],
        dp=values["data_parallel"],
        micro_batch=micro_batch or values["micro_batch"],
    )


def parallel(values: dict[str, Any]) -> dict[str, Any]:
    """The layout: sizes, micro batches per step on one pipeline, and the 1F1B bubble."""
    pp = values["pipeline_parallel"]
    m = values["micro_batches_per_step"]
    bubble = (pp - 1) / (m + pp - 1) if pp > 1 else 0.0
    return {
        "tp": values["tensor_parallel"],
        "pp": pp,
        "cp": values["context_parallel"],
        "ep": values["expert_parallel"],
        "dp": values["data_parallel"],
        "sp": values["sequence_parallel"],
        "micro_batches": m,
        "micro_batches_divide": float(m).is_integer(),
        "pipeline_bubble": bubble,
    }


def _params(shape: ModelShape, values: dict[str, Any]) -> dict[str, float]:
    """Parameters of the scenario split as the layout divides them."""
    parts = shape.breakdown
    experts = float(parts["routed_experts_total"])
    embedding, head = float(parts["embedding"]), float(parts["lm_head"])
    dense = max(float(values["total_params"]) - experts - embedding, 0.0)
    if not shape.tie_word_embeddings:
        dense = max(dense - head, 0.0)
    return {"experts": experts, "embedding": embedding, "lm_head": head, "layers": dense}


def _layer_kinds(shape: ModelShape, values: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(mixer, mlp, count) of the model's layer kinds, MTP layers counted when they are."""
    counts: dict[tuple[str, str], int] = {}
    mixer_full = "mla" if shape.mla else "attention"
    for layer_type, moe in zip(shape.layer_types, shape.moe_layer_flags):
        mixer = mixer_full if layer_type == FULL_ATTENTION else "gated_deltanet"
        key = (mixer, "moe" if moe else "dense")
        counts[key] = counts.get(key, 0) + 1
    mtp = values.get("num_mtp_layers", 0)
    if mtp:
        key = (mixer_full, "moe" if shape.is_moe else "dense")
        counts[key] = counts.get(key, 0) + mtp
    return [(mixer, mlp, n) for (mixer, mlp), n in counts.items()]


def _layer_kwargs(shape: ModelShape, values: dict[str, Any], b: int) -> dict[str, Any]:
    return {
        "b": b,
        "s": values["seq_len"],
        "hidden": shape.hidden_size,
        "heads": shape.num_heads,
        "kv_heads": shape.num_kv_heads,
        "head_dim": shape.qk_head_dim,
        "v_head_dim": shape.v_head_dim,
        "qk_norm": shape.qk_norm,
        "q_lora_rank": shape.q_lora_rank,
        "kv_lora_rank": shape.kv_lora_rank,
        "ffn": shape.intermediate_size,
        "experts": shape.num_experts,
        "top_k": shape.experts_per_token,
        "moe_ffn": shape.moe_intermediate_size,
        "shared_ffn": shape.shared_expert_intermediate_size,
        "router_fp32": shape.router_fp32,
        "norm_topk": True,
        "linear_key_heads": shape.linear_num_key_heads,
        "linear_value_heads": shape.linear_num_value_heads,
        "linear_key_head_dim": shape.linear_key_head_dim,
        "linear_value_head_dim": shape.linear_value_head_dim,
        "attention_kernel": values["attention_kernel"],
        "cp": values["context_parallel"],
    }


def _heaviest_stage(kinds: list[tuple[dict[str, float], int]], pp: int) -> list[dict]:
    """The layers of the most loaded stage, as an upper bound whatever the placement: the
    largest stage holds ceil(L / p) layers, taken here from the heaviest kinds first."""
    room = math.ceil(sum(count for _, count in kinds) / pp)
    layers: list[dict[str, float]] = []
    for per_layer, count in sorted(kinds, key=lambda kind: -sum(kind[0].values())):
        take = min(count, room - len(layers))
        layers += [per_layer] * take
    return layers


def memory(
    values: dict[str, Any],
    shape: ModelShape | None = None,
    *,
    recompute: str | None = None,
    micro_batch: int | None = None,
    logits_chunks: int = 1,
    virtual_stages: int = 1,
) -> dict[str, Any]:
    """Bytes on the most loaded GPU (the first or last pipeline stage): weights, gradients and
    optimizer states by ZeRO stage; activations of the stage's layers times the micro batches
    1F1B keeps in flight (plus, under full recompute, one layer rebuilt); the logits and what
    else lies outside the layers; the total against the GPU's memory."""
    shape = shape or scenario_shape(values)[0]
    recompute = recompute or values["recompute"]
    b = micro_batch or values["micro_batch"]
    tp, pp, cp, ep = (
        values[k]
        for k in ("tensor_parallel", "pipeline_parallel", "context_parallel", "expert_parallel")
    )
    dp, sp = values["data_parallel"], values["sequence_parallel"]
    params = _params(shape, values)
    experts_on_gpu = params["experts"] / (tp * pp * ep)
    kwargs = _layer_kwargs(shape, values, b)
    kinds, working = [], {}
    for mixer, mlp, count in _layer_kinds(shape, values):
        if mixer == "gated_deltanet" and not shape.linear_num_value_heads:
            continue
        per_layer = act.layer_activation_bytes(
            mixer, mlp, tp=tp, sp=sp, recompute=recompute, **kwargs
        )
        kinds.append((per_layer, count))
        if recompute == "full":
            whole = act.layer_activation_bytes(mixer, mlp, tp=tp, sp=sp, recompute="none", **kwargs)
            if sum(whole.values()) > sum(working.values()):
                working = whole
    layers = _heaviest_stage(kinds, pp)
    outside = act.model_activation_bytes(
        loss_fp32=False,  # a fused cross-entropy keeps no fp32 copy (the course's 15 GB: BF16)
        b=b,
        s=values["seq_len"],
        hidden=shape.hidden_size,
        vocab=shape.vocab_size,
        logits_chunks=logits_chunks,
        tp=tp,
        sp=sp,
        cp=cp,
    )
    logits_one = sum(v for k, v in outside.items() if k.startswith("logits"))
    head = 0 if shape.tie_word_embeddings and pp == 1 else params["lm_head"]
    layer_params = params["layers"] / (tp * pp) + experts_on_gpu
    # 1F1B: the first stage holds min(m, p) micro batches and the embedding; the last stage
    # one micro batch, the logits and the lm_head (one stage holds all of it when p = 1)
    in_flight = act.in_flight_micro_batches(
        pp, max(1, int(micro_batches(values, b))), virtual_stages
    )
    stages = {
        "first": (
            layer_params + params["embedding"] / tp + (head / tp if pp == 1 else 0),
            in_flight,
            outside if pp == 1 else None,
        ),
        "last": (layer_params + head / tp, 1, outside),
    }
    best = None
    for name, (on_gpu, flight, extra) in stages.items():
        dense_share = on_gpu - experts_on_gpu
        states = model_state_bytes(
            dense_share, values["zero_stage"], dp * cp, grad_bytes=values["grad_bytes"]
        )
        expert_states = model_state_bytes(
            experts_on_gpu,
            values["zero_stage"],
            max(dp * cp // ep, 1),
            grad_bytes=values["grad_bytes"],
        )
        for key in states:
            states[key] += expert_states[key]
        stage = act.stage_activation_bytes(
            layers, in_flight=flight, recompute_working_set=working or None, extra=extra
        )
        logits = logits_one * flight if extra else 0.0
        total = sum(states.values()) + stage["total"]
        if best is None or total > best["total"]:
            best = {
                **states,
                "activations": stage["total"] - logits,
                "logits": logits,
                "total": total,
                "stage": name if pp > 1 else "only",
                "in_flight": flight,
                "params_on_gpu": on_gpu,
            }
    gpu = hardware.GPUS[values["gpu"]]
    return {
        **best,
        "capacity": gpu.memory_bytes,
        "headroom": gpu.memory_bytes - best["total"],
        "fits": best["total"] <= gpu.memory_bytes,
        "recompute": recompute,
        "micro_batch": b,
        "convention": MEMORY_CONVENTION,
    }


def compute_seconds(values: dict[str, Any]) -> Compute:
    """The compute one GPU runs per step that collectives can hide behind: the forward, the
    backward (recompute included) and, within both, the attention core, each as the account's
    hardware FLOPs over the cluster at the GPU's peak (derive.communication.PHASE_SECONDS). A
    lower bound on the compute time (the GPUs never run at their peak), so the exposed
    communication computed from it is an upper bound. The linear-attention core is left out
    (lower still). The one place the communication model asks how long compute takes: a step-time
    model replaces this function."""
    subs = Scenario(values).substitutions()
    subs[sym.n_gpu] = values["num_gpus"]
    subs[sym.P] = values["peak_flops"]
    seconds = {
        name: float(expr.xreplace({x: sp.Float(subs[x]) for x in expr.free_symbols}))
        for name, expr in comm_forms.PHASE_SECONDS.items()
    }
    return Compute(**seconds)


def comm(values: dict[str, Any], shape: ModelShape | None = None) -> dict[str, Any]:
    """The collectives of a step (evaluate.communication) for the scenario's layout, the exposed
    communication after the overlap rules, and the share conclusions use: the team's measured
    `communication_share` if given, else the estimate (`share`, the upper bound: nothing
    overlapped; `exposed_share` beside it)."""
    shape = shape or scenario_shape(values)[0]
    gpu = hardware.GPUS[values["gpu"]]
    intra = values.get("intra_node_bandwidth") or gpu.intra_node_bandwidth(values["gpus_per_node"])
    inter = values.get("inter_node_bandwidth") or gpu.network_bandwidth
    experts = float(shape.breakdown["routed_experts_total"])
    mtp = values.get("num_mtp_layers", 0)  # counted (count_mtp): each a full layer
    result = communication(
        dp=values["data_parallel"],
        tp=values["tensor_parallel"],
        pp=values["pipeline_parallel"],
        cp=values["context_parallel"],
        ep=values["expert_parallel"],
        sp=values["sequence_parallel"],
        zero_stage=values["zero_stage"],
        grad_bytes=values["grad_bytes"],
        gpus_per_node=values["gpus_per_node"],
        intra_node_bandwidth=intra,
        inter_node_bandwidth=inter,
        micro_batch=values["micro_batch"],
        seq_len=values["seq_len"],
        hidden_size=shape.hidden_size,
        num_layers=shape.num_layers + mtp,
        num_full_attention_layers=shape.num_full_attention_layers + mtp,
        num_moe_layers=shape.num_moe_layers + (mtp if shape.is_moe else 0),
        experts_per_token=shape.experts_per_token,
        num_heads=shape.num_heads,
        num_kv_heads=shape.num_kv_heads,
        head_dim=shape.qk_head_dim,
        v_head_dim=shape.v_head_dim,
        dense_params=max(float(values["total_params"]) - experts, 1.0),
        expert_params=experts,
        micro_batches=max(1, math.ceil(micro_batches(values) - 1e-9)),
        step_time=values["step_time"],
        full_recompute=values["recompute"] == "full",
        cp_comm_type=values["cp_comm_type"],
        moe_router_max_nodes=values["moe_router_max_nodes"],
        fp8_dispatch=values["fp8_dispatch"],
        tp_comm_overlap=values["tp_comm_overlap"],
        overlap_grad_reduce=values["overlap_grad_reduce"],
        overlap_param_gather=values["overlap_param_gather"],
        ep_overlap=values["ep_overlap"],
        compute=compute_seconds(values),
    )
    out = result.as_dict()
    measured = values.get("communication_share")
    out["estimated_share"] = out["share"]
    out["basis"] = "measured" if measured is not None else "estimated"
    out["share_used"] = measured if measured is not None else out["estimated_share"]
    return out
