"""The levers, ranked for this run: each is the scenario changed and predicted again.

A lever sets scenario keys (`changes`: packed batching, another recompute policy or module set,
a doubled or halved micro batch, a faster attention kernel, the overlap flags, an interleaved
pipeline schedule, another TP, PP or CP, FP8 GEMMs). The changed scenario is resolved again
(evaluate.simulate.run.variant: the what-if path, the layout checked, DP and EP derived) and

- its step is predicted by the step-time model (evaluate.simulate.step_time.predict), as is the
  scenario's own: the gain is predicted step before / predicted step after (`step_before`,
  `step_after`), so the model's own error cancels. With a measured step the projected step is
  the measured one less the seconds the model says the lever saves (`step_time_from: measured
  - saved`: the unexplained remainder kept, the model cannot say what it is made of), or, where
  the measured step is shorter than the prediction, the measured one x after / before
  (`measured x after/before`); without one, the predicted step after (`predicted`) (`project`);
- its memory is the memory model's on the changed scenario (evaluate.simulate.run.memory: `peak_after`,
  `fits`).

A lever is feasible when the changed scenario resolves (the layout divides), fits in memory and
is faster, and the scenario's `framework` offers what it changes (inputs.frameworks, the table
the plan searches under: a Hugging Face Trainer run has no per-module recompute, pipeline, TP or
CP; `not_offered`). Overlap hides at most what the model leaves exposed: the overlap flags change only
the communication part. Two levers are not a scenario change: the load balance (the model's
experts are balanced; the lever puts the simulated router's straggler factor on the predicted
routed-expert GEMMs, and the load-aware placement's) and, with a measured `communication_share`,
the overlap lever, which is Amdahl's law on the measured share. Every lever names the scenario
keys it rests on (`rests_on`), the efficiencies of the model its gain rests on (`efficiencies`,
each with its source) and where its figure comes from (`source`).

The combination (`combined`) applies the chosen feasible levers together to the scenario and
predicts it again (never a product of gains); the combined scenario must fit in memory.
"""

from __future__ import annotations

import math
from typing import Any

from costmodel.evaluate.levers.lever import (  # noqa: F401 (re-exported: the lever as data)
    COMPUTE,
    DOES_NOT_FIT,
    EFFICIENCIES,
    INDIVISIBLE,
    JSON_FIELDS,
    LEVER_FIELDS,
    MEASURED_LESS_SAVED,
    MEASURED_SCALED,
    MIN_GAIN,
    NO_GAIN,
    RE_PREDICTED,
    Base,
    Lever,
    MemoryFigure,
    Reason,
    Repredicted,
    changed,
    changed_scenario,
    memory_of,
    nothing,
    predicted_of,
    project,
)
from costmodel.evaluate.levers.levers import (  # noqa: F401 (re-exported: the levers)
    LAYOUT,
    ROUTER_PLACEMENTS,
    ROUTER_SEED,
    ROUTER_TOKENS,
    VIRTUAL_STAGES,
    attention_kernel,
    best,
    chunked_cross_entropy,
    expert_seconds,
    fp8,
    layout,
    least_selective,
    load_balance,
    measured_overlap,
    micro_batch,
    not_offered,
    overlap,
    packing,
    pipeline,
    policy,
    recompute_levers,
)
from costmodel.evaluate.simulate import step_time
from costmodel.inputs import hardware
from costmodel.inputs.scenario import Scenario, as_scenario


def advice(
    sc: Scenario,
    acc: dict[str, Any],
    mem: dict[str, Any],
    comm: dict[str, Any],
    predicted: dict[str, Any] | None = None,
) -> list[Lever]:
    """The levers for this run (module docstring): the feasible ones by gain, largest first,
    then those that do not fit, do not divide or have nothing to gain."""
    sc = as_scenario(sc)
    shape = sc.shape
    predicted = predicted or step_time.predict(sc, shape, comm)
    base = Base(sc, predicted, mem, shape)
    out = [packing(base), *recompute_levers(base, shape)]
    out.append(overlap(base, comm, busy_share(acc)))
    out += [micro_batch(base), attention_kernel(base, acc), load_balance(base, shape)]
    out.append(pipeline(base))
    out += [layout(base, key, label) for key, label in LAYOUT]
    out += [fp8(base), chunked_cross_entropy(base)]
    out = [not_offered(base, x) or x for x in out]  # what the framework has
    out.sort(key=lambda x: (not x.feasible, -x.speedup))
    return out


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


# ------------------------------------------------------------------ the combination


def fp8_over_bf16(sc: Scenario) -> float:
    """The GPU's dense FP8 peak over its BF16 peak (1 without FP8 tensor cores)."""
    return hardware.fp8_gemm_ratio(as_scenario(sc).gpu, "hybrid") or 1.0


def _chosen(levers_list: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The feasible gains that are scenario changes, largest first."""
    chosen = [x for x in levers_list if x["feasible"] and x["speedup"] > 1 and x["changes"]]
    chosen = [x for x in chosen if x["step_time_from"] != "measured communication_share"]
    return sorted(chosen, key=lambda x: -x["speedup"])


def _conflicts(changes: dict[str, Any], more: dict[str, Any]) -> bool:
    """Whether a lever sets a key the combination already sets otherwise (two recompute
    policies, two micro batches)."""
    return any(key in changes and changes[key] != value for key, value in more.items())


def combined(
    levers_list: list[dict[str, Any]],
    step_time: float,
    busy: dict[str, Any] | None = None,
    sc: Scenario | None = None,
    predicted: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The chosen feasible levers applied together to the scenario and predicted again: from the
    largest gain down, each lever joins when its keys do not clash with those already set and
    the scenario with all of them resolves, fits in memory and is faster than without it.
    `path` is the way there: after each lever joins, the scenario with the levers so far predicted
    again (`step_after`) and projected (`step_time`, as `project`; uncapped).
    `product` is the re-predicted ratio (before / after), `speedup` it capped at `ceiling`, the
    speedup that would put the hardware at its peak (1 / busy_share: none without `busy`; with
    FP8 GEMMs, times the FP8 peak over the BF16 one)."""
    sc = as_scenario(sc) if sc is not None else None
    ceiling = 1 / busy["share"] if busy else math.inf
    before = predicted["seconds"] if predicted else step_time
    shape = sc.shape if sc is not None else None
    kept, changes, after, peak, fits, path = [], {}, before, None, None, []
    for lever in _chosen(levers_list) if sc is not None else []:
        if _conflicts(changes, lever["changes"]):
            continue
        trial = {**changes, **lever["changes"]}
        again = changed_scenario(sc, trial)
        if again is None:
            continue
        mem = memory_of(again, shape)
        if not mem["fits"]:
            continue
        seconds = predicted_of(again, shape)
        if seconds < after * (1 - MIN_GAIN):
            kept.append(lever)
            changes, after, peak, fits = trial, seconds, mem["total"], True
            path.append({"lever": lever["lever"], "step_after": seconds})
    product = before / after if after > 0 else 1.0
    if sc is not None and "hybrid" in (changes.get("fp8"), sc.fp8):
        ceiling *= fp8_over_bf16(sc)  # its GEMMs may run up to the FP8 peak
    speedup = max(1.0, min(product, ceiling))
    measured = None
    if sc is not None and sc.step_time_from == "measured":
        measured = step_time
    projected, basis = project(measured, before, before / speedup)
    if measured is None and sc is None:  # no scenario: the step given, over the gain
        projected, basis = step_time / speedup, "predicted"
    now = measured if measured is not None else (before if sc is not None else step_time)
    return {
        "levers": [x["lever"] for x in kept],
        "product": product,
        "speedup": speedup,
        "gain": now / projected if projected > 0 else 1.0,
        "capped": speedup < product,
        "step_time": projected,
        "ceiling": ceiling if busy else None,
        "ceiling_from": busy["from"] if busy else None,
        "step_before": before,
        "step_after": after,
        "step_time_from": basis,
        "path": [
            {**stop, "step_time": project(measured, before, stop["step_after"])[0]} for stop in path
        ],
        "peak_after": peak,
        "fits": fits,
        "changes": changes,
        "apart": [
            x["lever"]
            for x in levers_list
            if x["feasible"] and x["speedup"] > 1 and x["lever"] not in {k["lever"] for k in kept}
        ],
    }


def answer(acc: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The one answer the report and every page give to "what would this lever give this run"
    (issue 36: packing had two answers, selective recompute four): the ranked lever of the
    account (`acc["advice"]`), the step-time model's re-prediction, as the run's step before and
    after (`step_time`: the measured step less what the lever saves, or the predicted one),
    `gain` (their ratio), MFU on the step after (6ND over it), `rank` (1-based, in the report's
    order), `feasible` and `fits`; None where the account has no such lever."""
    ranked = acc["advice"]
    for rank, lever in enumerate(ranked, start=1):
        if lever["lever"] == name:
            now = acc["scenario"]["step_time"]
            after = lever["step_time"]
            return {
                "lever": name,
                "rank": rank,
                "step_before": now,
                "step_time": after,
                "gain": lever["gain"],
                "mfu": acc["mfu"] * now / after if after > 0 else acc["mfu"],
                "feasible": lever["feasible"],
                "fits": lever["fits"],
                "step_time_from": lever["step_time_from"],
            }
    return None
