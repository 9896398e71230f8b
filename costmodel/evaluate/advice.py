"""The levers, ranked for this run: each with its projected step time and speedup, whether it is
feasible here (memory fits, the layout divides), and the scenario keys it rests on.

A lever's speedup comes from the account (packing, recompute), from the step's parts and
Amdahl's law (communication, attention kernel, load balance, pipeline bubble) or from the
roofline of the model's own GEMMs (micro batch). Where it rests on a value the course assumed,
`rests_on` names the key and `account["assumptions"]` says the value is the course's.

A lever is a gain or nothing: its speedup is at least 1, and so is the combination (`combined`),
whose ceiling (`busy_share`) never comes from a figure the measured step time contradicts.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from costmodel.derive import levers
from costmodel.derive.roofline import attainable_flops
from costmodel.evaluate import gemms, router
from costmodel.evaluate.run import memory

#: The router simulation behind `load_balance` (as notebook 06): popularity skew, tokens,
#: placements, seed. The skew is an assumption: measure your router's counts to replace it.
ROUTER_SKEW = 1.0
ROUTER_TOKENS = 4096
ROUTER_PLACEMENTS = 8
ROUTER_SEED = 0
#: Interleaved 1F1B with this many model chunks per stage divides the bubble by it.
VIRTUAL_STAGES = 2


@functools.lru_cache(maxsize=64)
def _imbalance(experts: int, top_k: int, ep: int) -> tuple[float, float]:
    """(median straggler factor of random placements, that of a load-aware placement)."""
    run = router.simulate_router(
        experts, top_k, ep, ROUTER_TOKENS, ROUTER_SKEW, ROUTER_SEED, ROUTER_PLACEMENTS
    )
    return float(np.median(run.rank_factors)), float(run.greedy_factor)


def _lever(name, step_time, speedup, feasible, rests_on, note) -> dict[str, Any]:
    return {
        "lever": name,
        "speedup": speedup,
        "step_time": step_time / speedup,
        "feasible": bool(feasible),
        "rests_on": list(rests_on),
        "note": note,
    }


def _gemm_time(rows, peak, bandwidth) -> float:
    """Time units of the weight GEMMs of a micro batch at their roofline (FLOPs / attainable)."""
    return sum(
        r["forward_flops_per_token"] / attainable_flops(r["intensity"], peak, bandwidth)
        for r in rows
        if r["weights"]
    )


def micro_batch_gain(values) -> float:
    """Speedup of the weight GEMMs when the micro batch doubles, from the roofline of the
    model's own GEMMs (1 when every GEMM is compute-bound already)."""
    peak, bandwidth = values["peak_flops"], values["hbm_bandwidth"]
    b = values["micro_batch"]
    now = _gemm_time(gemms.model_gemms(values, b), peak, bandwidth)
    doubled = _gemm_time(gemms.model_gemms(values, 2 * b), peak, bandwidth)
    return now / doubled if doubled > 0 else 1.0


def expert_share(values, acc) -> float:
    """Share of the step's FLOPs in the routed experts' GEMMs (model FLOPs, 3 x forward)."""
    rows = gemms.model_gemms(values)
    per_token = sum(r["forward_flops_per_token"] for r in rows if r["key"].startswith("expert"))
    lin = (acc["linear_attention"] or {}).get("flops_per_step") or 0.0
    total = acc["model_flops_per_step"] + acc["attention"]["actual"]["flops_per_step"] + lin
    return 3 * per_token * values["tokens_per_step"] / total if total else 0.0


def advice(values: dict[str, Any], acc: dict[str, Any], mem: dict[str, Any], comm: dict[str, Any]):
    """The levers for this run, sorted by speedup (largest first), and their combined
    projection: the product of the feasible ones that can go together (the better of selective
    recompute and recompute off)."""
    step = values["step_time"]
    proj = acc["projections"]
    out = []
    pad = acc["padding"]
    lengths_key = "sequence_lengths" if values.get("sequence_lengths") else "mean_tokens_per_sample"
    out.append(
        _lever(
            "packing",
            step,
            pad["packing_speedup"],
            True,
            ["batching", "seq_len", lengths_key],
            "already packed: nothing to gain"
            if pad["batching"] == "packed"
            else "pad slots removed, if the step time is proportional to the slots",
        )
    )
    for name, policy, projected in (
        ("selective_recompute", "selective", proj["selective_recompute"]),
        ("recompute_off", "none", proj["recompute_off"]),
    ):
        speedup = projected["speedup"]
        fits = memory(values, recompute=policy)
        what = policy + (
            f" ({', '.join(proj['selective_recompute']['modules'] or [])})"
            if policy == "selective"
            else ""
        )
        out.append(
            _lever(
                name,
                step,
                speedup,
                speedup > 1 and fits["fits"],
                ["recompute", "recompute_modules", "attention_kernel"],
                f"memory with recompute {what}: {fitting(fits)}"
                if speedup > 1
                else f"no gain: recompute is already {values['recompute']}",
            )
        )
    out.append(overlap_lever(step, comm, busy_share(acc)))
    gain = micro_batch_gain(values)
    doubled = memory(values, micro_batch=2 * values["micro_batch"])
    divides = float(
        values["samples_per_step"] / (values["data_parallel"] * 2 * values["micro_batch"])
    ).is_integer()
    out.append(
        _lever(
            "micro_batch",
            step,
            gain,
            gain > 1 and doubled["fits"] and divides,
            ["micro_batch", "gpu"],
            f"roofline of the model's GEMMs at micro batch {2 * values['micro_batch']}; memory "
            f"{fitting(doubled)}",
        )
    )
    out.append(attention_kernel_lever(step, acc, values["attention_kernel_speedup"]))
    simulated = values["num_experts"] <= router.MAX_SIMULATED_EXPERTS
    if values["num_experts"] and values["expert_parallel"] > 1 and simulated:
        now_factor, greedy = _imbalance(
            values["num_experts"], values["experts_per_token"], values["expert_parallel"]
        )
        counted = expert_share(values, acc)
        # a share is at most the whole step: above 1, the model's expert GEMMs alone are more
        # than 6ND with the scenario's N counts (the two disagree), and they are all of it
        part = min(counted, 1.0)
        out.append(
            _lever(
                "load_balance",
                step,
                levers.amdahl(part, now_factor / greedy) if now_factor > greedy else 1.0,
                now_factor > greedy,
                ["expert_parallel", "num_experts"],
                f"straggler factor {now_factor:.2f} (simulated router, skew {ROUTER_SKEW:g}: an "
                f"assumption) -> {greedy:.2f} with a load-aware placement, on "
                f"{100 * part:.1f}% of the FLOPs"
                + (
                    f" (the model's expert GEMMs are {counted:,.3g}x the step's FLOPs as "
                    "counted with activated_params: N is too small for this shape)"
                    if counted > 1
                    else ""
                ),
            )
        )
    else:
        why = "no expert parallelism" if simulated else "too many experts to simulate"
        out.append(_lever("load_balance", step, 1.0, False, ["num_experts"], why))
    pp, m = values["pipeline_parallel"], values["micro_batches_per_step"]
    if pp > 1:
        # 1F1B: the bubble is (p - 1) / m of the ideal time; v chunks per stage divide it by v
        now_over_ideal, after_over_ideal = (pp - 1) / m, (pp - 1) / (m * VIRTUAL_STAGES)
        chunks = VIRTUAL_STAGES * pp
        splits = values["num_layers"] % chunks == 0
        # interleaving keeps p + (p - 1) / v micro batches in flight on the first stage
        interleaved = memory(values, virtual_stages=VIRTUAL_STAGES)
        why = [] if splits else [f"num_layers {values['num_layers']} not divisible by {chunks}"]
        out.append(
            _lever(
                "pipeline_bubble",
                step,
                (1 + now_over_ideal) / (1 + after_over_ideal),
                splits and interleaved["fits"],
                ["pipeline_parallel", "samples_per_step", "micro_batch"],
                f"bubble {100 * (pp - 1) / (m + pp - 1):.1f}% of the step; interleaving "
                f"{VIRTUAL_STAGES} model chunks per stage"
                + "".join(f"; {w}" for w in why)
                + f"; memory {fitting(interleaved)}",
            )
        )
    else:
        out.append(
            _lever("pipeline_bubble", step, 1.0, False, ["pipeline_parallel"], "no pipeline")
        )
    out.append(chunked_lever(values, mem, step))
    out.sort(key=lambda x: -x["speedup"])
    return out


def fitting(mem: dict[str, Any]) -> str:
    """A memory figure as the levers state it: the peak, its phase, and whether it fits."""
    verdict = "fits" if mem["fits"] else "does not fit"
    return (
        f"peak {mem['total'] / 1e9:,.1f} GB ({mem['peak_phase'].replace('_', ' ')}) of "
        f"{mem['capacity'] / 1e9:,.1f} GB usable: {verdict}"
    )


def chunked_lever(values: dict[str, Any], mem: dict[str, Any], step: float) -> dict[str, Any]:
    """Chunked cross-entropy: memory, not time. What it takes off the peak (nothing when the loss
    is not the peak phase, or the logits are chunked or never materialised already)."""
    if values["cross_entropy"] in ("chunked", "fused_linear"):
        note = f"already cross_entropy {values['cross_entropy']}"
    else:
        chunked = memory(values, logits_chunks=values["ce_chunks"])
        note = (
            f"{values['ce_chunks']} chunks: the loss holds {chunked['logits'] / 1e9:,.1f} GB of "
            f"logits instead of {mem['logits'] / 1e9:,.1f} GB; the peak goes from "
            f"{mem['total'] / 1e9:,.1f} GB ({mem['peak_phase'].replace('_', ' ')}) to "
            f"{fitting(chunked).removeprefix('peak ')} (memory, not time)"
        )
    return _lever("chunked_cross_entropy", step, 1.0, True, ["ce_chunks", "cross_entropy"], note)


def busy_share(acc: dict[str, Any]) -> dict[str, Any]:
    """The share of the step the hardware FLOPs take at the GPU's peak, the most the levers can
    take away from the rest: `share` and where it comes from (`from`).

    It is the HFU with attention (the attention core and any linear attention counted, as the
    kernel runs them) when that is at most 1. Above 1 the attention count needs more than the
    GPUs' peak for the measured step, so it cannot be what the step did (the kernel computes
    less, or the lengths are shorter than stated): the step time contradicts it, and only the
    6ND hardware FLOPs are known to have run. Their HFU is at most 1 (the account refuses
    more), so the ceiling 1 / share stays a speedup, never a slowdown."""
    with_attention = acc["attention"]["actual"]["hfu_with_attention"]
    if with_attention <= 1:
        return {"share": with_attention, "from": "hfu_with_attention"}
    return {"share": min(acc["hfu"], 1.0), "from": "hfu"}  # the check allows float rounding


def attention_kernel_lever(step: float, acc: dict[str, Any], faster: float) -> dict[str, Any]:
    """A faster attention kernel: Amdahl's law on the attention core's share of the FLOPs. No
    lever (1x, not feasible) when the attention count needs more than the GPUs' peak for the
    measured step: the step time contradicts the count, so its share of the time is not known."""
    share = acc["attention"]["actual"]["share"]
    over = acc["attention"]["actual"]["hfu_with_attention"]
    if over > 1:
        return _lever(
            "attention_kernel",
            step,
            1.0,
            False,
            ["attention_kernel_speedup", "attention_flops"],
            f"no lever: the attention count needs {100 * over:,.0f}% of the GPUs' peak for this "
            "step, more than they have, which contradicts the measured step; its share of the "
            "time is not known",
        )
    return _lever(
        "attention_kernel",
        step,
        levers.amdahl(share, faster),
        share > 0,
        ["attention_kernel_speedup", "attention_flops"],
        f"attention core {100 * share:.1f}% of the FLOPs, {faster:g}x faster",
    )


def overlap_lever(step: float, comm: dict[str, Any], busy: dict[str, Any]) -> dict[str, Any]:
    """Communication hidden behind compute: Amdahl's bound on the exposed share (the measured
    `communication_share`, or else the estimate's `exposed_share`: what the overlap rules of the
    scenario's settings leave exposed, not the nothing-overlapped upper bound), which is at most
    what compute at the GPU's peak leaves of the step. No lever (1x, not feasible) from an
    estimate longer than the measured step: the estimate contradicts the measurement."""
    if comm["basis"] == "estimated" and comm["exceeds_step"]:
        return _lever(
            "communication_overlap",
            step,
            1.0,
            False,
            ["communication_share"],
            f"no lever: the estimate ({comm['seconds']:,.4g} s, {100 * comm['share']:,.0f}% of "
            "the step) is longer than the measured step, which contradicts it; set the measured "
            "communication_share",
        )
    measured = comm["basis"] == "measured"
    share = comm["share_used"] if measured else comm["exposed_share"]
    exposed = min(share, 1 - busy["share"])
    at_peak = "the 6ND FLOPs at peak take" if busy["from"] == "hfu" else "compute at peak takes"
    return _lever(
        "communication_overlap",
        step,
        1 / (1 - exposed) if exposed < 1 else 1.0,
        exposed > 0,
        ["communication_share"],
        (
            f"measured communication share {100 * share:.2f}%"
            if measured
            else f"exposed communication {100 * share:.2f}% of the step (the estimate after its "
            f"overlap rules; {100 * comm['share']:.2f}% with nothing overlapped)"
        )
        + " hidden behind compute"
        + (
            f" (capped at {100 * exposed:.2f}%: {at_peak} the rest of the step, so some of it "
            "overlaps already)"
            if exposed < share
            else ""
        ),
    )


def combined(
    levers_list: list[dict[str, Any]], step_time: float, busy: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The product of the feasible levers that can go together: of selective recompute and
    recompute off, only the better feasible one; at most `ceiling`, the speedup that would put
    the hardware at its peak (1 / busy_share, at least 1: none without `busy`)."""
    chosen = [x for x in levers_list if x["feasible"] and x["speedup"] > 1]
    recompute = [x for x in chosen if x["lever"] in ("selective_recompute", "recompute_off")]
    if len(recompute) > 1:
        drop = min(recompute, key=lambda x: x["speedup"])
        chosen = [x for x in chosen if x is not drop]
    product = float(np.prod([x["speedup"] for x in chosen])) if chosen else 1.0
    ceiling = 1 / busy["share"] if busy else math.inf
    speedup = min(product, ceiling)
    return {
        "levers": [x["lever"] for x in chosen],
        "product": product,
        "speedup": speedup,
        "capped": speedup < product,
        "step_time": step_time / speedup,
        "ceiling": ceiling if busy else None,
        "ceiling_from": busy["from"] if busy else None,
    }
