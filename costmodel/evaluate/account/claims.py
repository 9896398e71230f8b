"""The course's claims that more than one page judges, judged once.

A claim the course makes in one place may be quoted on several pages (01 and 03 both judge "the
project's reported 8-10% is HFU"); each page used to judge it by its own rule, and the same claim
came out "成立" on one page and "有出入" on another. Here each such claim has one function: its
figures and its verdict, `holds`: True, False, or None where the scenario cannot judge it (a
team's run has no project-reported range of its own). The pages word the verdict
(costmodel.present.claims); they do not decide it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from costmodel import course
from costmodel.inputs.model_shape import matching_shape

if TYPE_CHECKING:
    from costmodel.inputs.scenario import Scenario


def _distance(value: float, low: float, high: float) -> float:
    """How far `value` lies outside [low, high] (0 inside)."""
    return max(low - value, 0.0, value - high)


def reported_convention(acc: dict[str, Any], sc: Scenario) -> dict[str, Any]:
    """The course's "the project's reported 8-10% is the HFU convention (a little optimistic, or
    N taken a little larger)" (figures.yaml nb01_reported_is_hfu).

    Candidates: MFU and HFU with the scenario's N and, where the scenario's model config is
    known, with the published activated count (embedding included; MFU and HFU are linear in N).
    The claim holds when HFU lies nearer the range than MFU and an HFU candidate lies in it (the
    course's "N taken a little larger"). For a team's scenario `holds` is None: the range is the
    course project's own report and says nothing of another run."""
    low, high = map(course.number, course.figures()["nb01_reported_is_hfu"]["range"])
    candidates = {"MFU": acc["mfu"], "HFU": acc["hfu"]}
    shape = matching_shape(sc.values)
    if shape is not None:
        scale = shape.activated_params_published / sc.activated_params
        candidates["MFU_published"] = acc["mfu"] * scale
        candidates["HFU_published"] = acc["hfu"] * scale
    gaps = {key: _distance(value, low, high) for key, value in candidates.items()}
    closer = "HFU" if gaps["HFU"] < gaps["MFU"] else "MFU" if gaps["MFU"] < gaps["HFU"] else None
    inside = [key for key, gap in gaps.items() if gap == 0]
    holds = None
    if not sc.changed:
        holds = closer == "HFU" and any(key.startswith("HFU") for key in inside)
    return {
        "low": low,
        "high": high,
        "candidates": candidates,
        "gaps": gaps,
        "closer": closer,
        "inside": inside,
        "holds": holds,
    }


def headline_understated(full: float, causal: float, baseline: float, course_run: bool):
    """The course's headline "the reported 8-10% understates the real utilization"
    (figures.yaml headline_understated), judged like with like. The course calls its 8-10% HFU
    (06.3): on the course's run `full` and `causal` are HFU with the attention core counted
    (recompute factor x (6ND + attention core), the core at three forward passes as the model
    counts it) under the two counts of the core, and the claim holds when both lie above the
    range's top. On a team's run the range is not theirs: `full` and `causal` are MFU with the
    core counted, `baseline` the 6ND MFU, and it holds when the causal count lies above it
    (leaving the core out understates the run's work). Returns (holds, top of the range)."""
    high = course.number(course.figures()["headline_understated"]["range"][1])
    if course_run:
        return min(full, causal) > high, high
    return causal > baseline, high


def communication_share_quoted(acc: dict[str, Any]) -> dict[str, float]:
    """The course's "section 4 found communication only 0.6%" (06.6, figures.yaml
    nb06_communication_share), against the layout's estimate: the expert all-to-all's dispatch
    alone (one direction), both directions, and every collective (the estimate's upper bound:
    nothing overlapped, links at their peak)."""
    collectives = acc["communication"]["collectives"]
    a2a = [c for c in collectives if c["kind"] == "all-to-all" and c["parallelism"] == "EP"]
    dispatch = sum(c["share"] for c in a2a if "dispatch" in c["name"])
    return {
        "dispatch": dispatch,
        "all_to_all": sum(c["share"] for c in a2a),
        "all": acc["communication"]["share"],
    }


def half_unit(value: float | int) -> float:
    """Half a unit of the last significant digit of `value` as written (7.5 -> 0.05, 405000 ->
    500, 4096 -> 0.5): how far the true value may lie from a rounded input. Trailing zeros of a
    whole number are taken as rounding (12,000 may be any of 11,500-12,500)."""
    from decimal import Decimal

    written = Decimal(repr(value)).normalize()
    return 0.5 * 10.0 ** written.as_tuple().exponent


def throughput_rounding(sc: Scenario) -> dict[str, float]:
    """The relative rounding of each input of the throughput cross-check, D / T against the
    measured tokens/s: step_time, measured_tokens_per_s and, when D comes from the mean (no
    lengths file), mean_tokens_per_sample. Their sum bounds the relative difference that the
    inputs' rounding alone explains."""
    inputs = {"step_time": sc.step_time, "measured_tokens_per_s": sc.measured_tokens_per_s}
    if sc.lengths is None:
        inputs["mean_tokens_per_sample"] = sc.mean_tokens_per_sample
    return {key: half_unit(v) / abs(v) for key, v in inputs.items() if v}


def communication_share_now(acc: dict[str, Any]) -> dict[str, Any]:
    """The share of the step its communication is not hidden behind compute, the figure the
    course's "communication is under 3% of the step" is judged on, the same on every page
    (issue 36: 08 and 09 judged the layout's upper bound, 10 the exposed share): the team's
    measured `communication_share` where given, else what the overlap rules leave exposed over
    the step (the step-time model's `communication_exposed`), at most what the hardware FLOPs at
    the GPU's peak leave of the step. `contradicted`: the estimate is longer than the measured
    step (then the share is 0 and nothing is judged on it); `upper_bound`: the estimate with
    nothing overlapped."""
    comm = acc["communication"]
    measured = comm["basis"] == "measured"
    contradicted = comm["basis"] == "estimated" and bool(comm["exceeds_step"])
    exposed = (
        acc["time"]["parts"]["communication_exposed"]["seconds"] / acc["scenario"]["step_time"]
    )
    ceiling = acc["advice_combined"]["ceiling"]
    cap = 1 - 1 / ceiling if ceiling and math.isfinite(ceiling) and ceiling > 1 else 0.0
    if contradicted:
        share = 0.0
    elif measured:  # through the overlap lever (Amdahl on the measured share), which caps it
        overlap = next(x for x in acc["advice"] if x["lever"] == "communication_overlap")
        share = 1 - 1 / overlap["speedup"]
    else:
        share = min(exposed, cap)
    return {
        "share": share,
        "basis": "measured" if measured else "exposed",
        "capped": not measured and not contradicted and share < exposed,
        "contradicted": contradicted,
        "upper_bound": comm["share_used"],
    }
