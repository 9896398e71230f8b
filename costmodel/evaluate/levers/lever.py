"""A lever as data, and the scenario changed and predicted again (costmodel.evaluate.levers.advice's
levers rest on it; costmodel.evaluate.levers.levers holds each lever).

`changed_scenario` derives the scenario with a lever's keys again (evaluate.simulate.run.variant: the
what-if path, costmodel.inputs.what_if);
`changed` predicts it again (the step-time model, the memory model, once per process) and says
whether it is feasible: it resolves, fits in memory and is faster. `project` counts a lever's
step from a measured one. `Lever` is one lever's figures and reason (a `Reason`, rendered by
costmodel.present.advice).
"""

from __future__ import annotations

import collections
from collections.abc import Iterator, Mapping
from dataclasses import field, fields, replace
from typing import Any

from costmodel.evaluate.simulate import run, step_time
from costmodel.inputs import efficiency
from costmodel.inputs.scenario import Scenario, as_scenario
from costmodel.inputs.shape import ModelShape
from costmodel.records import frozen_dataclass

RE_PREDICTED = (
    "the step-time model (costmodel.evaluate.simulate.step_time.predict) on the scenario with `changes`, "
    "beside its prediction of the scenario as it is; memory: costmodel.evaluate.simulate.run.memory on "
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
    "attention_kernel": efficiency.ATTENTION,
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
_PREDICTIONS: collections.OrderedDict[str, Any] = collections.OrderedDict()
_CACHED = 512


def changed_scenario(sc: Scenario, changes: dict[str, Any]) -> Scenario | None:
    """The scenario with a lever's `changes`, derived again from it (run.variant: the what-if
    path), or None where the layout does not divide; its step stays the scenario's (the share a
    collective takes is not what is exposed)."""
    sc = as_scenario(sc)
    out = run.variant(sc, changes)
    if out is None or "step_time" in changes:
        return out
    step = {"step_time": sc.sources.get("step_time", "derived")}
    return out.replace(step, step_time=sc.step_time, step_time_from=sc.step_time_from)


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


@frozen_dataclass
class Reason:
    """What a lever's note says, as data: a code and the figures the sentence names. The
    sentences are costmodel.present.advice's (`NOTES`, one per code)."""

    code: str
    facts: dict[str, Any] = field(default_factory=dict)


@frozen_dataclass
class MemoryFigure:
    """A memory figure as a lever states it: the peak, its phase, the usable capacity, fits."""

    peak: float
    phase: str
    capacity: float
    fits: bool

    @classmethod
    def of(cls, mem: dict[str, Any]) -> MemoryFigure:
        return cls(mem["total"], mem["peak_phase"], mem["capacity"], bool(mem["fits"]))


@frozen_dataclass
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


@frozen_dataclass
class Lever(Mapping):
    """One lever for this run (module docstring): the numbers, its feasibility and why, its
    reason as a code with figures (costmodel.present.advice renders it as the `note` of the
    report and of its JSON). `lever["speedup"]` reads a field as `lever.speedup` does."""

    lever: str
    speedup: float
    #: the run's step over the projected one (`step_time`): what the lever gives the run, the
    #: one figure the report and every page quote for it (speedup is the model's before / after)
    gain: float
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
    "gain",
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


def make_lever(base: Base, name: str, *, before, after, peak, fits, feasible, changes, rests_on,
           reason, source=RE_PREDICTED, **more) -> Lever:  # fmt: skip
    speedup = before / after if after > 0 else 1.0
    step, basis = base.projected(before, after)
    now = base.measured if base.measured is not None else before
    return Lever(
        lever=name,
        speedup=speedup,
        gain=now / step if step > 0 else 1.0,
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
    return make_lever(
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
    return make_lever(
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
