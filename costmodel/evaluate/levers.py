"""The levers of costmodel.evaluate.advice, one function each: the scenario as it is (a `Base`)
in, a `Lever` out (costmodel.evaluate.lever). See costmodel.evaluate.advice's docstring for what
a lever is and how its gain is counted.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from costmodel.derive import numeric
from costmodel.evaluate import run
from costmodel.evaluate.lever import (
    Base,
    Lever,
    MemoryFigure,
    Reason,
    _lever,
    changed,
    changed_scenario,
    memory_of,
    nothing,
)
from costmodel.inputs import hardware
from costmodel.inputs.scenario import Scenario, as_scenario

#: The router simulation behind `load_balance` (as notebook 06): tokens, placements, seed; the
#: popularity skew is the scenario's `router_skew` (an assumption unless measured).
ROUTER_TOKENS = 4096
ROUTER_PLACEMENTS = 8
ROUTER_SEED = 0
#: Interleaved 1F1B: model chunks per stage the pipeline lever tries (Megatron-LM's
#: --num-virtual-stages-per-pipeline-rank).
VIRTUAL_STAGES = 2


def _router():
    """The router simulation (NumPy): imported for a MoE scenario only."""
    from costmodel.evaluate import router

    return router


@functools.lru_cache(maxsize=64)
def _imbalance(experts: int, top_k: int, ep: int, skew: float) -> tuple[float, float]:
    """(median straggler factor of random placements, that of a load-aware placement). NumPy
    and the simulation are imported here: a dense scenario's report needs neither."""
    import numpy as np

    sim = _router().simulate_router(
        experts, top_k, ep, ROUTER_TOKENS, skew, ROUTER_SEED, ROUTER_PLACEMENTS
    )
    return float(np.median(sim.rank_factors)), float(sim.greedy_factor)


# ------------------------------------------------------------------ the scenario, changed
def packing(base: Base) -> Lever:
    sc = base.sc
    lengths = "sequence_lengths" if sc.sequence_lengths else "mean_tokens_per_sample"
    rests = ["batching", "seq_len", lengths]
    if sc.batching == "packed":
        return nothing(base, "packing", rests, "already_packed")
    rows = run.micro_batches(sc.replace(batching="packed"))
    if rows >= sc.micro_batches_per_step:
        return nothing(base, "packing", rests, "no_pad_slots")
    reason = Reason(
        "packed",
        {"seq_len": sc.seq_len, "rows": rows, "micro_batches": sc.micro_batches_per_step},
    )
    return changed(base, "packing", {"batching": "packed"}, rests, reason)


def recompute_levers(base: Base, shape) -> list[Lever]:
    """Selective recompute (Megatron-LM's default modules), the least selective recompute that
    fits (the module sets of run's fit rules, cheapest first), and recompute off."""
    sc = base.sc
    rests = ["recompute", "recompute_modules", "attention_kernel"]
    out = []
    default = changed(
        base, "selective_recompute", policy(sc, "selective"), rests, Reason("selective_default")
    )
    if sc.recompute == "selective" and not sc.recompute_modules:
        default = nothing(base, "selective_recompute", rests, "already_selective")
    out.append(default)
    out.append(least_selective(base, shape, rests))
    if sc.recompute == "none":
        out.append(nothing(base, "recompute_off", rests, "recompute_already_none"))
    else:
        off = policy(sc, "none")
        out.append(changed(base, "recompute_off", off, rests, Reason("recompute_none")))
    return out


def policy(sc: Scenario, name: str, modules: list | None = None) -> dict[str, Any]:
    """The keys of another recompute policy: its modules (null: Megatron-LM's default set, or
    none), the layer count of full recompute unset."""
    sc = as_scenario(sc)
    keys = {"recompute": name, "recompute_modules": modules}
    if sc.recompute_num_layers is not None:
        keys["recompute_num_layers"] = None
    return keys


def least_selective(base: Base, shape, rests) -> Lever:
    """The fewest modules of selective recompute that fit (the growing sets of run's fit rules,
    cheapest first), when that recomputes less than the scenario does now."""
    sc = base.sc
    chain = [
        keys
        for _label, keys, _note in run._candidates(sc.replace(recompute="none"), shape)
        if "recompute_modules" in keys
    ]
    chain = [policy(sc, "selective", keys["recompute_modules"]) for keys in chain]
    now = sc.recompute_modules if sc.recompute == "selective" else None
    tried, fits = None, False
    for keys in chain:
        with_keys = changed_scenario(sc, keys)
        if with_keys is None:
            continue
        tried, fits = keys, memory_of(with_keys, shape)["fits"]
        if fits:
            break
    if tried is None or tried["recompute_modules"] == now:
        code = "fewest_modules_already" if tried else "no_module_set"
        return nothing(base, "recompute_modules", rests, code)
    reason = Reason("fewest_modules", {"modules": list(tried["recompute_modules"]), "fits": fits})
    return changed(base, "recompute_modules", tried, rests, reason)


def overlap(base: Base, comm: dict[str, Any], busy: dict[str, Any]) -> Lever:
    """The overlap flags the scenario leaves off, turned on (DP's with the backward and forward,
    TP's with the GEMMs, the EP all-to-all behind another micro batch's compute); the model's
    overlap rules hide at most the exposed communication. A measured communication_share: Amdahl
    on it (the model does not predict a measured share). No lever from an estimate longer than
    the measured step: it contradicts the step."""
    sc, name, rests = base.sc, "communication_overlap", ["communication_share"]
    if comm["basis"] == "estimated" and comm["exceeds_step"]:
        facts = {"seconds": comm["seconds"], "share": comm["share"]}
        return nothing(base, name, rests, "estimate_exceeds_step", **facts)
    flags: dict[str, Any] = {}
    if not sc.overlap_grad_reduce:
        flags["overlap_grad_reduce"] = True
    if not sc.overlap_param_gather:
        flags["overlap_param_gather"] = True
    if sc.tensor_parallel > 1 and not sc.tp_comm_overlap:
        flags.update(tp_comm_overlap=True, sequence_parallel=True)
    if sc.expert_parallel > 1 and sc.ep_overlap == "none":
        flags["ep_overlap"] = "dualpipe"
    rests = [*rests, *flags] if flags else [*rests, "ep_overlap", "tp_comm_overlap"]
    if comm["basis"] == "measured":
        return measured_overlap(base, comm, busy, flags, rests)
    exposed = base.predicted["parts"]["communication_exposed"]
    if not flags:
        return nothing(base, name, rests, "all_overlaps_on")
    reason = Reason("overlap_flags", {"flags": dict(flags), "exposed": exposed})
    return changed(base, name, flags, rests, reason)


def measured_overlap(base, comm, busy, flags, rests) -> Lever:
    """Amdahl's law on the measured communication share, at most what compute at the GPU's
    peak leaves of the step."""
    share = comm["share_used"]
    exposed = min(share, 1 - busy["share"])
    speedup = 1 / (1 - exposed) if exposed < 1 else 1.0
    step = base.measured if base.measured is not None else base.seconds
    lever = _lever(
        base,
        "communication_overlap",
        before=step,
        after=step / speedup,
        peak=base.mem["total"],
        fits=base.mem["fits"],
        feasible=exposed > 0 and base.mem["fits"],
        changes=flags,
        rests_on=rests,
        reason=Reason("measured_share", {"share": share, "exposed": exposed}),
        source="Amdahl's law on the measured communication_share",
    )
    return replace(lever, step_time=step / speedup, step_time_from="measured communication_share")


def micro_batch(base: Base) -> Lever:
    """The micro batch doubled, or halved, whichever the model says is faster (feasible first):
    the GEMMs' roofline, the bubble and the micro batches per step follow."""
    sc, rests = base.sc, ["micro_batch", "gpu"]
    sizes = [2 * sc.micro_batch] + ([sc.micro_batch // 2] if sc.micro_batch > 1 else [])
    found = []
    for size in sizes:
        ok = ""
        if sc.batching == "padded":
            rows = sc.samples_per_step / (sc.data_parallel * size)
            ok = "" if float(rows).is_integer() else "samples per step do not divide"
        reason = Reason("micro_batch", {"size": size})
        found.append(changed(base, "micro_batch", {"micro_batch": size}, rests, reason, ok))
    return best(found)


def best(found: list[Lever]) -> Lever:
    """The feasible one with the largest gain, else the largest gain."""
    return max(found, key=lambda x: (x.feasible, x.speedup))


def attention_kernel(base: Base, acc: dict[str, Any]) -> Lever:
    """Eager attention: the flash kernel. Flash already: a kernel attention_kernel_speedup x
    faster, as one attention_efficiency (the forward's and backward's combined, times the
    speedup, at most 1). No lever when the attention count needs more than the GPUs' peak for
    the measured step: the step contradicts the count."""
    sc, name = base.sc, "attention_kernel"
    rests = ["attention_kernel", "attention_kernel_speedup", "attention_flops"]
    over = acc["attention"]["actual"]["hfu_with_attention"]
    if base.predicted["parts"]["attention"] <= 0:
        return nothing(base, name, rests, "no_attention_core")
    if over > 1 and base.measured is not None:
        return nothing(base, name, rests, "attention_exceeds_peak", hfu=over)
    if sc.attention_kernel == "eager":
        return changed(base, name, {"attention_kernel": "flash"}, rests, Reason("flash_kernel"))
    eff = base.predicted["efficiencies"]
    kappa = float(numeric.KERNEL_BACKWARD_OVER_FORWARD["flash"])
    forward = eff["attention_flash_forward"]["value"]
    backward = eff["attention_flash_backward"]["value"]
    now = (1 + kappa) / (1 / forward + kappa / backward)
    faster = sc.attention_kernel_speedup
    after = min(1.0, faster * now)
    if after <= now:
        return nothing(base, name, rests, "kernel_at_peak")
    facts = {
        "speedup": faster,
        "efficiency": after,
        "forward": forward,
        "backward": backward,
        "combined": now,
        "capped": after < faster * now,
    }
    reason = Reason("faster_kernel", facts)
    return changed(base, name, {"attention_efficiency": round(after, 6)}, rests, reason)


def expert_seconds(base: Base, shape) -> float:
    """The routed experts' GEMMs on the most loaded GPU per step as the model predicts them
    (forward and backward, every micro batch; the stage's layers taken as MoE layers first)."""
    detail = base.predicted["detail"]
    rows = detail["gemm_forward_seconds_per_micro_batch"]
    per_layer = sum(t for key, t in rows.items() if key.startswith("expert_"))
    moe_layers = shape.num_moe_layers + base.sc.num_mtp_layers
    layers = min(detail["stage_layers"], moe_layers)
    return 3 * detail["micro_batches"] * layers * per_layer


def load_balance(base: Base, shape) -> Lever:
    """The model's experts are balanced: this lever puts the simulated router's straggler
    factor (random placements, median) on the predicted routed-expert GEMMs, and a load-aware
    placement's: before = predicted + E (f - 1), after = predicted + E (g - 1)."""
    sc, name = base.sc, "load_balance"
    simulated = not sc.num_experts or sc.num_experts <= _router().MAX_SIMULATED_EXPERTS
    if not (sc.num_experts and sc.expert_parallel > 1 and simulated):
        code = "no_expert_parallelism" if simulated else "too_many_experts"
        return nothing(base, name, ["num_experts"], code)
    skew = sc.router_skew
    if skew is None:
        return nothing(base, name, ["router_skew"], "no_router_skew")
    now, greedy = _imbalance(sc.num_experts, sc.experts_per_token, sc.expert_parallel, float(skew))
    experts = expert_seconds(base, shape)
    before = base.seconds + experts * (now - 1)
    after = base.seconds + experts * (greedy - 1)
    facts = {
        "experts": experts,
        "straggler": now,
        "skew": skew,
        "greedy": greedy,
        "before": before,
        "after": after,
    }
    return _lever(
        base, name, before=before, after=after, peak=base.mem["total"], fits=base.mem["fits"],
        feasible=now > greedy and experts > 0 and base.mem["fits"], changes={},
        rests_on=["expert_parallel", "num_experts", "router_skew"],
        reason=Reason("router_straggler", facts),
        source="the simulated router (costmodel.evaluate.router) on the step-time model's "
        "routed-expert GEMMs",
    )  # fmt: skip


def pipeline(base: Base) -> Lever:
    """1F1B: interleaved 1F1B with VIRTUAL_STAGES model chunks per stage (Megatron-LM requires
    the stage's layers to divide); interleaved: twice the chunks."""
    sc, name = base.sc, "pipeline_bubble"
    rests = ["pipeline_parallel", "pipeline_schedule", "virtual_pipeline", "micro_batch"]
    pp, schedule = sc.pipeline_parallel, sc.pipeline_schedule or "1f1b"
    if pp <= 1:
        return nothing(base, name, ["pipeline_parallel"], "no_pipeline")
    if schedule not in ("1f1b", "interleaved"):
        return nothing(base, name, rests, "schedule_without_lever", schedule=schedule)
    chunks = 2 * sc.virtual_pipeline if schedule == "interleaved" else VIRTUAL_STAGES
    indivisible = bool(sc.num_layers % (chunks * pp))
    facts = {
        "share": base.predicted["parts"]["pipeline_bubble"] / base.seconds,
        "chunks": chunks,
        "num_layers": sc.num_layers,
        "divisor": chunks * pp,
        "indivisible": indivisible,
    }
    keys = {"pipeline_schedule": "interleaved", "virtual_pipeline": chunks}
    ok = "num_layers not divisible" if indivisible else ""
    return changed(base, name, keys, rests, Reason("interleaved", facts), ok)


LAYOUT = (("tensor_parallel", "TP"), ("pipeline_parallel", "PP"), ("context_parallel", "CP"))


def layout(base: Base, key: str, label: str) -> Lever:
    """TP, PP or CP doubled or halved (DP follows, EP refitted to it), the better of the two."""
    sc, found = base.sc, []
    for size in (2 * sc.values[key], sc.values[key] // 2):
        if size < 1 or size == sc.values[key]:
            continue
        keys: dict[str, Any] = {key: size}
        if key == "tensor_parallel":
            keys["sequence_parallel"] = size > 1 and (sc.sequence_parallel or sc.values[key] == 1)
        again = changed_scenario(sc, keys)
        facts: dict[str, Any] = {"label": label, "before": sc.values[key], "after": size}
        if again is not None:
            facts["dp"] = (sc.data_parallel, again.data_parallel)
            if again.expert_parallel != sc.expert_parallel:
                keys["expert_parallel"] = again.expert_parallel
                facts["ep"] = (sc.expert_parallel, again.expert_parallel)
        reason = Reason("layout", facts)
        found.append(changed(base, key, keys, [key, "num_gpus"], reason, resolved=again))
    return best(found)


def fp8(base: Base) -> Lever:
    """FP8 GEMMs (fp8: hybrid, Transformer Engine) at the GPU's FP8 peak and gemm_fp8."""
    sc, rests = base.sc, ["fp8", "gpu"]
    if sc.fp8 != "none":
        return nothing(base, "fp8", rests, "already_fp8", fp8=sc.fp8)
    if not hardware.GPUS[sc.gpu].fp8_flops:
        return nothing(base, "fp8", rests, "no_fp8_cores", gpu=sc.gpu)
    return changed(base, "fp8", {"fp8": "hybrid"}, rests, Reason("fp8_hybrid"))


def chunked_cross_entropy(base: Base) -> Lever:
    """Chunked cross-entropy: memory, not time. What it takes off the peak."""
    sc, mem = base.sc, base.mem
    rests = ["ce_chunks", "cross_entropy"]
    if sc.cross_entropy in ("chunked", "fused_linear"):
        return nothing(
            base,
            "chunked_cross_entropy",
            rests,
            "already_chunked",
            cross_entropy=sc.cross_entropy,
        )
    chunked = run.memory(sc, logits_chunks=sc.ce_chunks)
    facts = {
        "chunks": sc.ce_chunks,
        "logits_after": chunked["logits"],
        "logits_before": mem["logits"],
        "before": MemoryFigure.of(mem),
        "after": MemoryFigure.of(chunked),
    }
    out = nothing(base, "chunked_cross_entropy", rests, "chunked_logits", **facts)
    return replace(
        out,
        peak_after=chunked["total"],
        fits=chunked["fits"],
        feasible=chunked["fits"],
        changes={"cross_entropy": "chunked"},
    )
