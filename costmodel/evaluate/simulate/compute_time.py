"""The compute of one step on the most loaded GPU, part by part, at the kernels' efficiencies
(derive.step_time; the efficiencies are costmodel.inputs.efficiency's, or the scenario's).

Per GPU. The GEMM list (evaluate.simulate.gemms.model_gemms) is already one GPU's under TP, CP and EP,
per micro batch, with each row's `layers` the whole model's; the pipeline stage is applied here:
the most loaded stage holds ceil(L / PP) layers, taken from the heaviest layer kinds first
(evaluate.simulate.stage: the memory model's rule too, an upper bound whatever the placement), plus the
lm_head (and the MTP projection), which the last stage runs; with a stated uneven split
(first_stage_layers, last_stage_layers) the slowest of the first, a middle and the last stage,
the lm_head on the last only (`_slowest_stage`). A step runs the scenario's micro
batches per pipeline (`micro_batches_per_step`: padded rows of seq_len slots, so the weight
GEMMs pay for the pad slots; packed rows of documents).

- Weight GEMMs: each row at its roofline, max(2mnk / (eta P), beta (mk + kn + mn) / (eta_m BW)),
  forward and backward 3 x the forward (at the forward's shape); eta the row's shape's
  (costmodel.inputs.gemm_efficiency: tile and wave quantization, the size ramp); a routed
  expert's row once per expert the GPU holds (E / EP), those experts one grouped GEMM. With
  `fp8: hybrid` the layers' GEMMs run at the GPU's FP8 peak and under `gemm_fp8` with 1-byte
  inputs (Transformer Engine; the lm_head stays BF16).
- The attention core over the rows the kernel runs (`kernel_sum_squares`: the real lengths, sum
  of s_i^2, or with `batching: padded` and `attention_on_padding: computed` every padded row of
  seq_len; the gated-DeltaNet core likewise over the slots), as the kernel computes it under the
  causal mask (KERNEL_SQUARE: flash skips the masked half, eager computes the square), whatever
  `attention_flops` counts; forward at the kernel's forward efficiency, its
  backward (2.5 x the forward's FLOPs for flash, 2 x for eager) at the backward's, each off the
  kernel family's published curve at seq_len / CP tokens (`attention_efficiencies`;
  costmodel.inputs.attention_kernels).
- Linear attention (gated DeltaNet, evaluate.simulate.linear): the chunked core's forward and 2 x it
  backward, at the flash kernel's efficiencies (chunked kernels of small GEMMs: an assumption).
- Memory-bound work, bytes over eta_m BW: per layer the norms (forward read and write, backward
  read x and dy, write dx: 4 + 6 bytes an element), the two residual adds (6 + 6), the MLP's
  activation (SwiGLU 6 + 10 bytes per element of the intermediate width, GELU 4 + 6), the MoE
  permute and unpermute (every routed copy read and written, forward and backward); the loss
  (the logits read forward, read and written backward: 2 + 4 bytes a logit); the optimizer step
  (Adam on the GPU's shard: fp32 weights, gradients, two moments read, weights and moments
  written, BF16 weights written: 30 bytes a parameter; fewer with optimizer_dtype and
  main_params_dtype, derive.plain.optimizer_step_bytes).
- Dropout (`dropout: true`, `_dropout`): the two hidden dropouts' and the eager core's bytes,
  DROPOUT_BYTES and ATTENTION_DROPOUT_BYTES (a flash kernel draws its mask inside); their
  kernel launches are not counted.
- Recompute: the forward again of what the policy recomputes: under full recompute r of the
  stage's layers (r = 1, or the share `recompute_method: block` redoes), their GEMMs,
  elementwise work and kernel launches, not the lm_head (Megatron-LM does not re-run the output layer); under
  selective recompute the GEMM rows of its weight modules (`mlp`, `moe`, `shared_experts`,
  `mla_up_proj`), the norms with `layernorm`, the MoE activation with `moe_act`; r_core of the
  attention core's forward (and the linear-attention core's).

- Kernel overhead: `kernel_launch_overhead` seconds per kernel the stage launches, forward
  and backward per micro batch (evaluate.simulate.kernels: the layers' GEMMs, cores,
  elementwise kernels and MoE routing, the lm_head and the loss), its own part; full
  recompute launches r of the layers' forward kernels again.

Not counted: the embedding lookup, RoPE, and the gradient accumulation into fp32
(fused into the weight-gradient GEMM, as Megatron-LM's gradient_accumulation_fusion does);
the router's softmax and top-k as work (their kernels' launches are counted).
"""

from __future__ import annotations

from typing import Any

from costmodel.derive import activations, numeric, plain
from costmodel.evaluate.memory import gpu_memory
from costmodel.evaluate.simulate import kernels, optimizer_step, stage
from costmodel.evaluate.simulate.attention_core import core_forward_flops, pads_computed
from costmodel.evaluate.simulate.gemms import weight_shapes
from costmodel.evaluate.simulate.linear import linear_attention
from costmodel.inputs import efficiency, gemm_efficiency, hardware
from costmodel.inputs.attention_kernels import KIND
from costmodel.inputs.scenario import Scenario, as_scenario
from costmodel.inputs.shape import ModelShape

#: Which GEMM rows belong to which block of a layer (keys of evaluate.simulate.gemms).
MIXER_ROWS = {
    "attention": ("qkv", "q", "q_a", "q_b", "kv_a", "kv_b", "attention_output"),
    "gated_deltanet": ("linear_in", "linear_out"),
}
MLP_ROWS = {
    "dense": ("dense_gate_up", "dense_down"),
    "moe": (
        "router",
        "expert_gate_up",
        "expert_down",
        "shared_gate_up",
        "shared_down",
        "shared_expert_gate",
    ),
}
OUTSIDE_ROWS = ("mtp_projection", "lm_head")
#: The GEMM rows each weight module of `recompute_modules` redoes (derive.recompute).
MODULE_ROWS = {
    "mlp": MLP_ROWS["dense"],
    "moe": MLP_ROWS["moe"],
    "shared_experts": ("shared_gate_up", "shared_down", "shared_expert_gate"),
    "mla_up_proj": ("q_b", "kv_b"),
}
#: Bytes per element of the elementwise kernels, forward and backward (module docstring).
NORM_BYTES = (4, 6)
RESIDUAL_BYTES = (6, 6)
ACTIVATION_BYTES = {True: (6, 10), False: (4, 6)}  # gated (SwiGLU), two-matrix (GELU)
#: A hidden dropout's bytes per element, forward and backward, by the framework's elementwise
#: kernels: fused into the residual add (Megatron-LM's bias-dropout-add fusion), its one-byte
#: mask written and read; its own kernel, read, write and mask. The eager core's dropout on the
#: probabilities is its own kernel after the softmax (Megatron-LM's CoreAttention), per score.
DROPOUT_BYTES = {"fused": (1, 1), "eager": (5, 5)}
ATTENTION_DROPOUT_BYTES = (5, 5)
LOSS_BYTES = (2, 4)


def gemm_rows(
    sc: Scenario, eff: dict, shape: ModelShape, micro_batch: int | None = None
) -> dict[str, float]:
    """Forward seconds per micro batch and layer of each GEMM row key (per GPU), at
    `micro_batch` sequences per micro batch (default the scenario's)."""
    out: dict[str, float] = {}
    for key, m, n, k in weight_shapes(sc, micro_batch):
        peak, bandwidth, _, e_m, beta = gemm_rates(sc, eff, key)
        count = gemm_count(sc, shape, key)
        e = shaped_efficiency(sc, eff, key, (m, n, k), count)
        out[key] = plain.gemm_seconds(m, n, k, peak, bandwidth, e, e_m, beta) * count
    return out


def row_efficiencies(sc: Scenario) -> dict[str, float]:
    """The efficiency each weight GEMM row key runs at in the step time (`shaped_efficiency`,
    the scenario's efficiencies): what `costmodel gemms` shows beside each row."""
    sc = as_scenario(sc)
    eff = efficiency.efficiencies(sc.values)
    return {
        key: shaped_efficiency(sc, eff, key, (m, n, k), gemm_count(sc, sc.shape, key))
        for key, m, n, k in weight_shapes(sc)
    }


def shaped_efficiency(sc: Scenario, eff: dict, key: str, mnk, groups, minimum=stage.minimum):
    """The efficiency a weight GEMM row of shape `mnk` runs at (costmodel.inputs.gemm_efficiency:
    tile and wave quantization over the GPU's SMs and the size ramp, under the generation's
    large-GEMM efficiency), a routed expert's row grouped with the `groups` experts the GPU
    holds (one grouped GEMM); a scenario's `gemm_efficiency` is every shape's (its value wins).
    `minimum`: NumPy's where the shapes are arrays (the plan's search)."""
    peak, _, large, _, beta = gemm_rates(sc, eff, key)
    if sc.gemm_efficiency is not None:
        return large
    groups = groups if key.startswith("expert_") else 1
    dtype = "fp8" if beta == 1 else "bf16"
    return gemm_efficiency.efficiency(*mnk, sc.gpu, dtype, large, groups, peak, minimum)


def gemm_rates(sc: Scenario, eff: dict, key: str) -> tuple[float, float, float, float, int]:
    """(peak, bandwidth, large-GEMM efficiency, memory efficiency, bytes per element) a weight
    GEMM row runs at (`shaped_efficiency` lowers the efficiency by the row's shape): the layers' at the FP8 peak with 1-byte inputs under `fp8: hybrid` on a GPU with
    one (the lm_head stays BF16)."""
    ratio = hardware.fp8_gemm_ratio(sc.gpu, sc.fp8) if key != "lm_head" else None
    in_fp8 = ratio is not None
    return (
        sc.peak_flops * (ratio or 1),
        sc.hbm_bandwidth,
        eff["gemm_fp8" if in_fp8 else "gemm"].value,
        eff["hbm"].value,
        1 if in_fp8 else 2,
    )


def gemm_count(sc, shape: ModelShape, key: str):
    """How many times a GPU runs a row per layer: a routed expert's once per expert it holds
    (E / EP), any other once."""
    if key.startswith("expert_"):
        return shape.num_experts / sc.expert_parallel if shape.is_moe else 1
    return 1


def _sharing(sc: Scenario) -> float:
    """GPUs that share one layer's step work: the pipelines (DP), CP and TP."""
    return sc.data_parallel * sc.context_parallel * sc.tensor_parallel


def _elementwise(sc, shape: ModelShape, mlp: str, mixer: str = "attention") -> tuple:
    """Bytes per micro batch of one layer's memory-bound work, forward and backward, and the
    recomputable pieces' forward bytes (`layernorm`, `moe_act`)."""
    tp, cp = sc.tensor_parallel, sc.context_parallel
    tokens = sc.micro_batch * sc.seq_len / cp
    rows = stage.where(sc.sequence_parallel, tokens / tp, tokens)
    h = shape.hidden_size
    norm = [x * shape.norms_per_layer * rows * h for x in NORM_BYTES]
    residual = [x * 2 * rows * h for x in RESIDUAL_BYTES]
    act_bytes = ACTIVATION_BYTES[shape.mlp_gated]
    if mlp == "moe":
        width = shape.experts_per_token * shape.moe_intermediate_size
        width += shape.shared_expert_intermediate_size
        permute = 2 * 2 * tokens * h * 2 * shape.experts_per_token  # read + write, both ways
    else:
        width, permute = shape.intermediate_size, 0.0
    act = [x * tokens * width / tp for x in act_bytes]
    drop = _dropout(sc, shape, mixer, rows) if sc.dropout else (0.0, 0.0)
    forward = norm[0] + residual[0] + act[0] + permute + drop[0]
    backward = norm[1] + residual[1] + act[1] + permute + drop[1]
    return forward, backward, {"layernorm": norm[0], "moe_act": act[0] if mlp == "moe" else 0.0}


def _dropout(sc, shape: ModelShape, mixer: str, rows) -> tuple[float, float]:
    """Dropout's bytes per micro batch of one layer, forward and backward: DROPOUT_BYTES on the
    two hidden dropouts' `rows` x hidden, ATTENTION_DROPOUT_BYTES on each eager score."""
    hidden = DROPOUT_BYTES[activations.FRAMEWORKS[sc.framework].elementwise]
    elements = 2 * rows * shape.hidden_size  # the two hidden dropouts'
    eager = mixer == "attention" and KIND[sc.attention_kernel] == "eager"  # 0 or 1 below
    scores = sc.micro_batch * shape.num_heads / sc.tensor_parallel * sc.seq_len**2 * eager
    scores /= sc.context_parallel  # the eager core's square: its seq_len / CP query rows
    return tuple(x * elements + y * scores for x, y in zip(hidden, ATTENTION_DROPOUT_BYTES))


def layer_kinds(shape: ModelShape, sc: Scenario) -> list[tuple[str, str, int]]:
    """(mixer, mlp, count) of the model's layers (evaluate.simulate.stage.layer_kinds, MTP layers
    counted), MLA's full attention an `attention` mixer (its GEMM rows are MIXER_ROWS')."""
    return [
        ("attention" if mixer == "mla" else mixer, mlp, count)
        for mixer, mlp, count in stage.layer_kinds(shape, sc.num_mtp_layers)
    ]


def layer_flops(sc: Scenario) -> tuple[float, float]:
    """The attention core's and the linear-attention core's forward FLOPs of the step per layer
    of its kind, at the kernel's square (`core_forward_flops`), before the GPUs share them."""
    core = core_forward_flops(sc, counted=False) / max(sc.num_full_attention_layers, 1)
    lin = linear_attention(sc)
    linear = lin["flops_per_step"] / 3 / lin["layers"] if lin and lin["flops_per_step"] else 0.0
    if pads_computed(sc):  # the chunked kernel runs the padded rows' slots, not only D
        linear *= sc.samples_per_step * sc.seq_len / sc.tokens_per_step
    return core, linear


def attention_efficiencies(sc, eff, kind: str | None = None):
    """(forward, backward) efficiency of the attention kernel (`kind`: flash or eager; the
    scenario's by default) at the sequence length one CP rank's kernel sees, seq_len / CP
    (Efficiency.at: the published curve, or a flat or the scenario's value; `sc` may hold NumPy
    arrays of layouts)."""
    kind = kind or KIND[sc.attention_kernel]
    flash = ("attention_flash_forward", "attention_flash_backward")
    names = ("attention_eager", "attention_eager") if kind == "eager" else flash
    seq = sc.seq_len / sc.context_parallel
    return eff[names[0]].at(seq), eff[names[1]].at(seq)


def layer_seconds(sc, shape, eff, gemm, core_fwd, linear_fwd, mixer, mlp) -> dict[str, float]:
    """Seconds per step of one layer of a kind on one GPU (every micro batch)."""
    mb = sc.micro_batches_per_step
    bandwidth = sc.hbm_bandwidth * eff["hbm"].value
    gemm_fwd = mb * sum(gemm.get(key, 0.0) for key in MIXER_ROWS[mixer] + MLP_ROWS[mlp])
    rows = set(MIXER_ROWS[mixer] + MLP_ROWS[mlp])
    modules = {
        f"{name}_gemm_forward": mb * sum(gemm.get(key, 0.0) for key in keys if key in rows)
        for name, keys in MODULE_ROWS.items()
    }
    mem_fwd, mem_bwd, pieces = _elementwise(sc, shape, mlp, mixer)
    peak = sc.peak_flops
    forward_eff, backward_eff = attention_efficiencies(sc, eff)
    flash_fwd, flash_bwd = attention_efficiencies(sc, eff, "flash")
    kappa = float(numeric.KERNEL_BACKWARD_OVER_FORWARD[KIND[sc.attention_kernel]])
    core = core_fwd if mixer == "attention" else 0.0
    linear = linear_fwd if mixer == "gated_deltanet" else 0.0
    gemms = sum(gemm_count(sc, shape, key) for key in sorted(rows) if key in gemm)
    launches = kernels.layer_kernels(
        gemms,
        shape.norms_per_layer,
        mixer,
        mlp,
        KIND[sc.attention_kernel],
        bool(shape.shared_expert_intermediate_size),
    )
    overhead = mb * sc.kernel_launch_overhead
    return {
        "gemm_forward": gemm_fwd,
        "core_forward": core / (peak * forward_eff),
        "core_backward": kappa * core / (peak * backward_eff),
        "linear_forward": linear / (peak * flash_fwd),
        "linear_backward": 2 * linear / (peak * flash_bwd),
        "memory_forward": mb * mem_fwd / bandwidth,
        "memory_backward": mb * mem_bwd / bandwidth,
        "overhead_forward": overhead * launches[0],
        "overhead_backward": overhead * launches[1],
        "layernorm_forward": mb * pieces["layernorm"] / bandwidth,
        "moe_act_forward": mb * pieces["moe_act"] / bandwidth,
        **modules,
    }


def layer_total(layer: dict[str, float]) -> float:
    return (
        3 * layer["gemm_forward"]
        + layer["core_forward"]
        + layer["core_backward"]
        + layer["linear_forward"]
        + layer["linear_backward"]
        + layer["memory_forward"]
        + layer["memory_backward"]
        + layer["overhead_forward"]
        + layer["overhead_backward"]
    )


def stage_runs(kinds: list[tuple[dict, int]], pp: int) -> list[tuple[int, int]]:
    """The most loaded stage's layers (evaluate.simulate.stage.heaviest_stage) of the kinds (a layer's
    seconds, `layer_seconds`, and its count), the heaviest by their step's seconds (`layer_total`)."""
    return stage.heaviest_stage(
        [layer_total(layer) for layer, _ in kinds], [n for _, n in kinds], pp
    )


def _recompute_weights(sc: Scenario, sums: dict[str, float]) -> float:
    """Seconds the recompute policy spends again on weight GEMMs and elementwise work: full
    recompute redoes its share r of the stage's layers (their GEMMs and elementwise forward; the
    lm_head is not re-run), selective recompute the GEMM rows of its weight modules and the
    elementwise work of `layernorm` and `moe_act`; a stated selective_recompute_fraction r is r
    of the layers' GEMM forward."""
    r, policy = sc.recompute_weights_fraction, sc.recompute
    if policy == "full":
        redone = sums.get("gemm_forward", 0.0) + sums.get("memory_forward", 0.0)
        return r * (redone + sums.get("overhead_forward", 0.0))
    if policy != "selective":
        return 0.0
    modules = sc.recompute_modules or []
    pieces = sum(sums.get(f"{m}_forward", 0.0) for m in ("layernorm", "moe_act") if m in modules)
    if sc.recompute_fraction_from != "modules":  # a stated r
        return pieces + r * sums.get("gemm_forward", 0.0)
    weights = [m for m in MODULE_ROWS if m in modules]
    if "moe" in weights and "shared_experts" in weights:  # moe redoes the shared experts too
        weights.remove("shared_experts")
    return pieces + sum(sums.get(f"{m}_gemm_forward", 0.0) for m in weights)


def stage_sums(sc: Scenario, shape: ModelShape, eff: dict, gemm: dict[str, float]):
    """The most loaded stage's per-step seconds summed over its layers (each `layer_seconds` key, added
    one layer after another: evaluate.simulate.stage.stage_sum), its number of layers, and the attention
    and linear-attention cores' forward FLOPs per layer on one GPU."""
    share = _sharing(sc)
    core, linear = layer_flops(sc)
    core_fwd, linear_fwd = core / share, linear / share
    kinds = [
        (layer_seconds(sc, shape, eff, gemm, core_fwd, linear_fwd, mixer, mlp), count)
        for mixer, mlp, count in layer_kinds(shape, sc)
    ]
    sizes = stage.stage_sizes(sc)
    if sizes is not None:
        sums, layers = _slowest_stage(sc, shape, eff, gemm, kinds, sizes)
        return sums, layers, core_fwd, linear_fwd
    runs = stage_runs(kinds, sc.pipeline_parallel)
    sums = stage.stage_sum([layer for layer, _ in kinds], runs)
    return sums, sum(n for _, n in runs), core_fwd, linear_fwd


def _slowest_stage(sc, shape, eff, gemm, kinds, sizes: dict[str, int]) -> tuple[dict, int]:
    """The sums and layers of the slowest stage of an uneven split (stage.stage_sizes): each
    stage's layers from the heaviest kinds, the last stage with the lm_head and the loss
    (`holds_head`), the stage whose compute and recompute take longest setting the pace."""
    weights, counts = [layer_total(layer) for layer, _ in kinds], [n for _, n in kinds]
    bandwidth = sc.hbm_bandwidth * eff["hbm"].value
    best = None
    for name, room in sizes.items():
        runs = stage.heaviest_stage(weights, counts, sc.pipeline_parallel, room)
        sums = {
            **stage.stage_sum([layer for layer, _ in kinds], runs),
            "holds_head": name == "last",
        }
        parts = compute_parts(sc, shape, gemm, sums, bandwidth, 0.0)[0]["parts"]
        seconds = sum(parts.values()) + recompute_seconds(sc, sums)
        if best is None or seconds > best[0]:
            best = (seconds, sums, sum(n for _, n in runs))
    return best[1], best[2]


def recompute_seconds(sc, sums: dict[str, float]) -> float:
    """The recompute part of a step from its stage's sums (`stage_sums`): the weights'
    (`_recompute_weights`) and r_core of the cores' forward. `sc` needs only the recompute keys
    and the fractions resolve derives."""
    core = sums.get("core_forward", 0.0) + sums.get("linear_forward", 0.0)
    return _recompute_weights(sc, sums) + sc.recompute_core_fraction * core


def compute(
    sc: Scenario,
    shape: ModelShape | None = None,
    gemm: dict[str, float] | None = None,
    staged: tuple | None = None,
) -> dict[str, Any]:
    """The compute parts of one step on the most loaded GPU (seconds), the phases collectives
    hide behind, and the efficiencies used (module docstring). `gemm`: the GEMM rows' seconds
    (`gemm_rows`) and `staged`: `stage_sums` of them, when the caller has them (the plan's
    search, for many layouts alike)."""
    sc = as_scenario(sc)
    shape = shape or sc.shape
    eff = efficiency.efficiencies(sc.values)
    gemm = gemm_rows(sc, eff, shape) if gemm is None else gemm
    sums, layers, core_fwd, linear_fwd = staged or stage_sums(sc, shape, eff, gemm)
    bandwidth = sc.hbm_bandwidth * eff["hbm"].value
    out, loss = assemble(
        sc, shape, gemm, sums, bandwidth, optimizer_step.optimizer_bytes(sc, shape) / bandwidth
    )
    out["detail"] = {
        "gemm_forward_seconds_per_micro_batch": gemm,
        "stage_layers": layers,
        "micro_batches": sc.micro_batches_per_step,
        "loss_seconds": sum(loss),
        "optimizer_seconds": out["optimizer_seconds"],
        "attentioncore_forward_flops_per_layer": core_fwd,
        "linear_attention_forward_flops_per_layer": linear_fwd,
    }
    offload = offload_seconds(sc, shape, sums, layers)
    if offload:  # only with cpu_offload_layers: the outputs of a run without it are unchanged
        out["parts"]["memory_bound"] += offload
        out["detail"]["activation_offload_seconds"] = offload
    out["efficiencies"] = {name: {"value": e.value, "source": e.source} for name, e in eff.items()}
    out["generation"] = efficiency.generation(sc.gpu)
    out["shared_expert_seconds"] = shared_expert_seconds(sums)
    return out


def offload_seconds(sc: Scenario, shape: ModelShape, sums: dict[str, float], layers: int) -> float:
    """The exposed seconds of the offloaded activations' copies (cpu_offload_layers): each
    layer's saved tensors go to the host while the next layer's forward runs and come back
    while the backward of the layer after it runs (Transformer Engine's offload handler, on
    its own stream), per micro batch; what a copy takes beyond one layer's forward (or
    backward), the stage's mean, is exposed. The host link: hardware.host_bandwidth."""
    moved = gpu_memory.offload_bytes(shape, sc)
    if not moved:
        return 0.0
    mb = sc.micro_batches_per_step
    kinds = ("gemm", "core", "linear", "memory", "overhead")
    forward = sum(sums.get(f"{k}_forward", 0.0) for k in kinds)
    backward = 2 * sums.get("gemm_forward", 0.0)
    backward += sum(sums.get(f"{k}_backward", 0.0) for k in kinds[1:])
    per_layer = [x / (mb * max(layers, 1)) for x in (forward, backward)]
    link = hardware.host_bandwidth(sc.gpu)
    return mb * sum(max(0.0, b / link - t) for b in moved for t in per_layer)


def shared_expert_seconds(sums: dict[str, float]) -> float:
    """The shared expert's GEMMs of the stage's step (forward, and backward at twice it), from
    its sums (`stage_sums`): the compute the EP all-to-all hides behind with
    moe_shared_expert_overlap (its recompute not counted: a lower bound)."""
    return 3 * sums.get("shared_experts_gemm_forward", 0.0)


def assemble(sc, shape: ModelShape, gemm, sums, bandwidth: float, optimizer) -> tuple[dict, list]:
    """`compute`'s parts, phases and optimizer seconds from the GEMM rows, the stage's sums and
    the optimizer's seconds (`compute_parts` and `with_recompute`), and the loss's forward and
    backward seconds."""
    computed, loss = compute_parts(sc, shape, gemm, sums, bandwidth, optimizer)
    recompute = recompute_seconds(sc, sums)
    core_forward = sums.get("core_forward", 0.0)
    return with_recompute(computed, recompute, sc.recompute_core_fraction, core_forward), loss


def compute_parts(sc, shape: ModelShape, gemm, sums, bandwidth, optimizer) -> tuple[dict, list]:
    """The compute parts but the recompute, the forward's seconds and the optimizer's (the
    recompute policy apart: `with_recompute` adds it), and the loss's forward and backward
    seconds (none on a stage of an uneven split without the lm_head: `_slowest_stage`).
    Elementwise: the plan's search passes arrays over many layouts (evaluate.plan.plan_batch)."""
    mb = sc.micro_batches_per_step
    outside_fwd = mb * sum(gemm.get(key, 0.0) for key in OUTSIDE_ROWS)
    tokens = sc.micro_batch * sc.seq_len / sc.context_parallel
    logits = tokens * shape.vocab_size / sc.tensor_parallel
    loss = [mb * x * logits / bandwidth for x in LOSS_BYTES]
    launches = kernels.outside_kernels(sum(1 for key in OUTSIDE_ROWS if key in gemm))
    outside = [mb * sc.kernel_launch_overhead * n for n in launches]
    if not sums.get("holds_head", True):  # a stage of an uneven split without the lm_head
        outside_fwd, loss, outside = 0.0, [0.0, 0.0], [0.0, 0.0]
    gemm_fwd = sums.get("gemm_forward", 0.0) + outside_fwd
    overhead_fwd = sums.get("overhead_forward", 0.0) + outside[0]
    parts = {
        "gemms": 3 * gemm_fwd,
        "attention": sums.get("core_forward", 0.0) + sums.get("core_backward", 0.0),
        "linear_attention": sums.get("linear_forward", 0.0) + sums.get("linear_backward", 0.0),
        "memory_bound": sums.get("memory_forward", 0.0)
        + sums.get("memory_backward", 0.0)
        + sum(loss)
        + optimizer,
        "kernel_overhead": overhead_fwd + sums.get("overhead_backward", 0.0) + outside[1],
    }
    forward = (
        gemm_fwd
        + sums.get("core_forward", 0.0)
        + sums.get("linear_forward", 0.0)
        + sums.get("memory_forward", 0.0)
        + loss[0]
        + overhead_fwd
    )
    return {"parts": parts, "forward": forward, "optimizer_seconds": optimizer}, loss


def with_recompute(computed: dict, recompute, core_fraction, core_forward) -> dict:
    """The parts, phases and optimizer seconds of a step from `compute_parts` and its recompute
    policy: the recompute part (`recompute_seconds`) in the parts and the backward, the share
    `core_fraction` of the attention core's forward (`core_forward`) in the attention phase."""
    parts = {**computed["parts"], "recompute": recompute}
    optimizer, forward = computed["optimizer_seconds"], computed["forward"]
    phases = {
        "forward": forward,
        "backward": sum(parts.values()) - optimizer - forward,
        "attention": parts["attention"] + core_fraction * core_forward,
    }
    return {"parts": parts, "phases": phases, "optimizer_seconds": optimizer}
