"""The levers, ranked for this run: each is the scenario changed and predicted again.

A lever sets scenario keys (`changes`: packed batching, another recompute policy or module set,
a doubled or halved micro batch, a faster attention kernel, the overlap flags, an interleaved
pipeline schedule, another TP, PP or CP, FP8 GEMMs). The changed scenario is resolved again
(evaluate.run.variant: the layout checked, DP and EP derived) and

- its step is predicted by the step-time model (evaluate.step_time.predict), as is the
  scenario's own: the gain is predicted step before / predicted step after (`step_before`,
  `step_after`), so the model's own error cancels. With a measured step the projected step is
  the measured one less the seconds the model says the lever saves (`step_time_from: measured
  - saved`: the unexplained remainder kept, the model cannot say what it is made of), or, where
  the measured step is shorter than the prediction, the measured one x after / before
  (`measured x after/before`); without one, the predicted step after (`predicted`) (`project`);
- its memory is the memory model's on the changed scenario (evaluate.run.memory: `peak_after`,
  `fits`).

A lever is feasible when the changed scenario resolves (the layout divides), fits in memory and
is faster. Overlap hides at most what the model leaves exposed: the overlap flags change only
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

import collections
import functools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from costmodel.derive import numeric
from costmodel.evaluate import run, step_time
from costmodel.inputs import hardware
from costmodel.inputs.scenario import Scenario, as_scenario
from costmodel.inputs.shape import ModelShape

#: The router simulation behind `load_balance` (as notebook 06): tokens, placements, seed; the
#: popularity skew is the scenario's `router_skew` (an assumption unless measured).
ROUTER_TOKENS = 4096
ROUTER_PLACEMENTS = 8
ROUTER_SEED = 0
#: Interleaved 1F1B: model chunks per stage the pipeline lever tries (Megatron-LM's
#: --num-virtual-stages-per-pipeline-rank).
VIRTUAL_STAGES = 2

RE_PREDICTED = (
    "the step-time model (costmodel.evaluate.step_time.predict) on the scenario with `changes`, "
    "beside its prediction of the scenario as it is; memory: costmodel.evaluate.run.memory on "
    "the changed scenario"
)
#: The efficiencies of the model each lever's gain rests on (costmodel.inputs.efficiency).
COMPUTE = ("gemm", "attention_flash_forward", "attention_flash_backward", "hbm")
EFFICIENCIES = {
    "packing": ("gemm", "hbm"),
    "selective_recompute": COMPUTE,
    "recompute_modules": COMPUTE,
    "recompute_off": COMPUTE,
    "communication_overlap": COMPUTE,
    "micro_batch": ("gemm", "hbm"),
    "attention_kernel": ("attention_flash_forward", "attention_flash_backward", "attention_eager"),
    "load_balance": ("gemm", "hbm"),
    "pipeline_bubble": COMPUTE,
    "tensor_parallel": COMPUTE,
    "pipeline_parallel": COMPUTE,
    "context_parallel": COMPUTE,
    "fp8": ("gemm", "gemm_fp8", "hbm"),
    "chunked_cross_entropy": ("hbm",),
}
#: A lever gains when the model's step after is at least this much shorter (a gain that
#: rounds to 1.000x is none).
MIN_GAIN = 5e-4
#: Scenario keys a changed scenario takes from the scenario as it is (run.variant re-resolves
#: from the course's defaults: the lengths file is not read again, and a null the course fills).
_KEPT = (
    "name",
    "sequence_lengths",
    "sum_squared_lengths",
    "sum_squared_lengths_from",
    "measured_tokens_per_s",
    "communication_share",
)


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


_PREDICTIONS: collections.OrderedDict[str, Any] = collections.OrderedDict()
_CACHED = 512


def changed_scenario(sc: Scenario, changes: dict[str, Any]) -> Scenario | None:
    """The scenario with a lever's `changes`, resolved again (run.variant), or None where the
    layout does not divide; the lengths and the keys of _KEPT stay the scenario's."""
    sc = as_scenario(sc)
    out = run.variant(sc, changes)
    if out is None:
        return None
    kept = {key: sc.values[key] for key in _KEPT if key not in changes}
    # the step: the share a collective takes is not what is exposed
    return out.replace(**kept, step_time=sc.step_time, step_time_from=sc.step_time_from)


def _cached(kind: str, changed: Scenario, work) -> Any:
    key = kind + repr(sorted(changed.values.items()))
    if key not in _PREDICTIONS:
        _PREDICTIONS[key] = work()
        while len(_PREDICTIONS) > _CACHED:
            _PREDICTIONS.popitem(last=False)
    return _PREDICTIONS[key]


def memory_of(changed: Scenario, shape: ModelShape) -> dict[str, Any]:
    """The memory model on a changed scenario, worked out once per process (a lever changes no
    key of the model's shape: the scenario's shape serves)."""
    return _cached("memory", changed, lambda: run.memory(changed, shape))


def predicted_of(changed: Scenario, shape: ModelShape) -> float:
    """The predicted step of a changed scenario, worked out once per process."""
    return _cached("step", changed, lambda: step_time.predict(changed, shape)["seconds"])


#: How a lever's projected step is counted from a measured one (`project`).
MEASURED_LESS_SAVED = "measured - saved"
MEASURED_SCALED = "measured x after/before"


def project(measured: float | None, before: float, after: float) -> tuple[float, str]:
    """A lever's projected step and how it was counted. Without a measured step: the predicted
    after. With one the model explains (measured >= predicted before): the measured step less
    the seconds the model says the lever saves, before - after; the unexplained remainder is
    kept as it is, since the model cannot say what it is made of (so overlap never saves more
    than the exposed communication it predicts). With a measured step shorter than the
    prediction (the model says it cannot be that fast): the measured step x after / before."""
    if measured is None:
        return after, "predicted"
    if measured >= before:
        return measured - (before - after), MEASURED_LESS_SAVED
    return measured * (after / before), MEASURED_SCALED


class Base:
    """The scenario as it is: its values, its predicted step and memory, and the measured step
    (None when the step is the prediction)."""

    def __init__(self, sc: Scenario, predicted: dict[str, Any], mem: dict[str, Any], shape=None):
        self.sc = as_scenario(sc)
        self.shape = shape or self.sc.shape
        self.predicted = predicted
        self.seconds = predicted["seconds"]
        self.mem = mem
        self.measured = self.sc.step_time if self.sc.step_time_from == "measured" else None

    def projected(self, before: float, after: float) -> tuple[float, str]:
        """The projected step (`project`)."""
        return project(self.measured, before, after)

    def efficiencies(self, name: str) -> dict[str, dict[str, Any]]:
        got = self.predicted["efficiencies"]
        return {e: got[e] for e in EFFICIENCIES.get(name, ()) if e in got}


# ------------------------------------------------------------------ a lever, as data


@dataclass(frozen=True)
class Reason:
    """What a lever's note says, as data: a code and the figures the sentence names. The
    sentences are costmodel.present.advice's (`NOTES`, one per code)."""

    code: str
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryFigure:
    """A memory figure as a lever states it: the peak, its phase, the usable capacity, fits."""

    peak: float
    phase: str
    capacity: float
    fits: bool

    @classmethod
    def of(cls, mem: dict[str, Any]) -> MemoryFigure:
        return cls(mem["total"], mem["peak_phase"], mem["capacity"], bool(mem["fits"]))


@dataclass(frozen=True)
class Repredicted:
    """The changed scenario predicted again (`changed`): the step before and after, its memory,
    and whether the model says it is faster."""

    before: float
    after: float
    memory: MemoryFigure
    gain: bool


#: Why a changed scenario is not feasible (`Lever.blockers`): its keys do not divide (`ok`,
#: the lever's own check), it does not fit, it is not faster.
INDIVISIBLE, DOES_NOT_FIT, NO_GAIN = "indivisible", "does not fit", "no gain"


@dataclass(frozen=True)
class Lever(Mapping):
    """One lever for this run (module docstring): the numbers, its feasibility and why, its
    reason as a code with figures (costmodel.present.advice renders it as the `note` of the
    report and of its JSON). `lever["speedup"]` reads a field as `lever.speedup` does."""

    lever: str
    speedup: float
    step_time: float
    feasible: bool
    rests_on: list[str]
    reason: Reason
    step_before: float
    step_after: float
    step_time_from: str
    peak_after: float
    fits: bool
    changes: dict[str, Any]
    efficiencies: dict[str, dict[str, Any]]
    source: str
    #: the re-prediction of a changed scenario (None: no scenario change was predicted)
    repredicted: Repredicted | None = None
    #: why a changed scenario is not feasible (INDIVISIBLE, DOES_NOT_FIT, NO_GAIN)
    blockers: tuple[str, ...] = ()

    def __getitem__(self, name: str) -> Any:
        if name not in LEVER_FIELDS:
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(LEVER_FIELDS)

    def __len__(self) -> int:
        return len(LEVER_FIELDS)


#: The fields a lever's JSON object holds, in order ("note" is the reason, rendered).
JSON_FIELDS = (
    "lever",
    "speedup",
    "step_time",
    "feasible",
    "rests_on",
    "note",
    "step_before",
    "step_after",
    "step_time_from",
    "peak_after",
    "fits",
    "changes",
    "efficiencies",
    "source",
)
LEVER_FIELDS = tuple(f.name for f in fields(Lever))


def _lever(base: Base, name: str, *, before, after, peak, fits, feasible, changes, rests_on,
           reason, source=RE_PREDICTED, **more) -> Lever:  # fmt: skip
    speedup = before / after if after > 0 else 1.0
    step, basis = base.projected(before, after)
    return Lever(
        lever=name,
        speedup=speedup,
        step_time=step,
        feasible=bool(feasible),
        rests_on=list(rests_on),
        reason=reason,
        step_before=before,
        step_after=after,
        step_time_from=basis,
        peak_after=peak,
        fits=fits,
        changes=dict(changes),
        efficiencies=base.efficiencies(name),
        source=source,
        **more,
    )


def nothing(base: Base, name: str, rests_on, code: str, **facts) -> Lever:
    """A lever with nothing to gain here: 1x, not feasible, no change."""
    return _lever(
        base,
        name,
        before=base.seconds,
        after=base.seconds,
        peak=base.mem["total"],
        fits=base.mem["fits"],
        feasible=False,
        changes={},
        rests_on=rests_on,
        reason=Reason(code, facts),
        source="no change",
    )


def changed(
    base: Base, name: str, changes: dict, rests_on, reason: Reason, ok: str = "", resolved=False
) -> Lever:
    """The scenario with `changes`, predicted again: the gain, the peak after, feasible when it
    resolves, fits and is faster (and `ok` is empty: a reason it is not, else). `resolved`: the
    changed scenario when the caller has it already."""
    sc = changed_scenario(base.sc, changes) if resolved is False else resolved
    if sc is None:
        refused = nothing(base, name, rests_on, "refused", changes=dict(changes))
        return replace(refused, changes=dict(changes))
    after, mem = predicted_of(sc, base.shape), memory_of(sc, base.shape)
    faster = after < base.seconds * (1 - MIN_GAIN)
    blockers = [INDIVISIBLE] if ok else []
    if not mem["fits"]:
        blockers.append(DOES_NOT_FIT)
    if not faster:
        blockers.append(NO_GAIN)
    return _lever(
        base,
        name,
        before=base.seconds,
        after=after,
        peak=mem["total"],
        fits=mem["fits"],
        feasible=not blockers,
        changes=changes,
        rests_on=rests_on,
        reason=reason,
        repredicted=Repredicted(base.seconds, after, MemoryFigure.of(mem), faster),
        blockers=tuple(blockers),
    )


# ------------------------------------------------------------------ the levers


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
    sc = as_scenario(sc)
    gpu = hardware.GPUS[sc.gpu]
    return gpu.fp8_flops / gpu.bf16_flops if gpu.fp8_flops else 1.0


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
    return {
        "levers": [x["lever"] for x in kept],
        "product": product,
        "speedup": speedup,
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
