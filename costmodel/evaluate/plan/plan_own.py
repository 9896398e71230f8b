"""The rows of `costmodel plan` (evaluate.plan.plan): a searched layout's (`row_of`, the search's
figures) and the scenario's own (`own_row`: the search's figures where the search holds it, the
report's model where it does not)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from costmodel.evaluate.plan.plan_eval import Evaluator
from costmodel.evaluate.plan.plan_space import (
    Core,
    Recompute,
    Schedule,
    cores,
    outside,
    own_core,
    own_recompute,
    own_schedule,
    schedule_options,
)
from costmodel.evaluate.simulate import run, step_time
from costmodel.inputs.scenario import Scenario
from costmodel.inputs.stages import UNEVEN_KEYS


@dataclass(frozen=True)
class Row:
    """One layout and its predicted step."""

    core: Core
    recompute: Recompute
    zero_stage: int
    schedule: Schedule
    seconds: float
    parts: dict[str, float]
    peak_bytes: float
    capacity: float

    @property
    def key(self) -> tuple:
        return (self.core, self.recompute, self.zero_stage, self.schedule)

    @property
    def headroom(self) -> float:
        return self.capacity - self.peak_bytes


def row_of(ev: Evaluator, core: Core, rc: Recompute, zero: int, schedule: Schedule, peak) -> Row:
    """A searched layout's row: the plan's parts of its step (Evaluator.parts)."""
    parts = ev.parts(core, rc, zero, schedule)
    parts = {name: float(parts.get(name, 0.0)) for name in step_time.PARTS}
    return Row(core, rc, zero, schedule, sum(parts.values()), parts, peak, ev.usable)


def own_row(ev: Evaluator, own_sc: Scenario) -> tuple[Row, str, str]:
    """The scenario's own layout (row, why it is not ranked, why it is outside the search). A
    layout the search holds, split evenly, as the search evaluates it; one outside the search
    (a size, a folding or a schedule it does not generate) or with an uneven pipeline split
    (`own_sc`: plan_base.own_scenario) by the report's model (`reported_row`), the same formulas
    on the one layout, and ranked all the same. Not ranked where it does not fit."""
    base = ev.base
    core, rc, schedule = own_core(base), own_recompute(base), own_schedule(base)
    if core.tp == 1:
        core = dataclasses.replace(core, sp=False)
    why = ""
    folded = base.expert_tensor_parallel not in (None, base.tensor_parallel)  # ETP: not searched
    if folded or (core not in ev.batch.index and core not in set(cores(base, base.num_gpus))):
        why = outside(base)
    schedules = schedule_options(base, core.pp)
    if not why and schedule not in schedules:
        why = f"its schedule ({schedule.label}) does not split the layers evenly over its stages"
    if why or own_sc is not base:
        why = (
            why
            or "its uneven pipeline split ("
            + ", ".join(key for key in UNEVEN_KEYS if own_sc.values.get(key))
            + ")"
        )
        row = reported_row(ev, own_sc, core, rc, schedule)
    else:
        peak = float(ev.peaks(core, rc, schedules)[base.zero_stage, schedules.index(schedule)])
        row = row_of(ev, core, rc, base.zero_stage, schedule, peak)
    if row.peak_bytes > ev.usable:
        return row, "the scenario's own layout does not fit (memory model)", why
    return row, "", why


def reported_row(ev: Evaluator, sc: Scenario, core: Core, rc: Recompute, schedule: Schedule) -> Row:
    """The own layout's row by the report's model (step_time.predict, run.memory)."""
    parts = step_time.predict(sc)["parts"]
    parts = {name: float(parts.get(name, 0.0)) for name in step_time.PARTS}
    peak = float(run.memory(sc, sc.shape)["total"])
    return Row(core, rc, sc.zero_stage, schedule, sum(parts.values()), parts, peak, ev.usable)
