"""A sweep's points that the step-time and memory models evaluate: each point's scenario (one
path, `point`), its predicted step and parts, its memory peak and its phase, whether it fits, and
the closed forms' arguments at that point; for `costmodel sweep` (evaluate.sweep.sweep).

Every point goes through `point(base, changes)`: the sweep's scenario with the point's values
set by the one what-if path (costmodel.inputs.what_if: as `--set` would set them on the
scenario's inputs, the layout rules deciding DP and EP, tensor_parallel 1 turning sequence
parallelism off), or the validator's one-line refusal; where the point's model shape is not the
scenario's and the team gave neither, activated_params and total_params follow the shape (a
`hidden_size` changes N; set in the same pass, once the shape is built: what_if's `follow`),
which `costmodel report --set` does not do.

The figures come from the functions the report uses: `step_time.predict` (the predicted step and
its parts), `run.memory` (the peak on the most loaded GPU, its phase and whether it fits), the
account's generated numeric forms (evaluate.sweep.sweep: MFU on the predicted step is the account's MFU
with the predicted step as its step). Points that differ only in a key the models do not read
(CLOSED_FORM_ONLY) share one evaluation, points that change only the layout (RELAID_KEYS)
share the sweep scenario's model shape, and points that differ only in numbers are evaluated
at once, the same code on arrays (evaluate.sweep.sweep_lanes).
"""

from __future__ import annotations

import contextlib
import gc
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from costmodel.derive import numeric
from costmodel.derive.lanes import as_float
from costmodel.evaluate.account import account
from costmodel.evaluate.simulate import run, step_time
from costmodel.evaluate.simulate.linear import linear_attention
from costmodel.evaluate.sweep import sweep_lanes
from costmodel.inputs import models, what_if
from costmodel.inputs.resolution import params_contradiction
from costmodel.inputs.scenario import RELAID_KEYS, Scenario

#: Keys that only the closed forms read (the measured step and throughput): points that differ
#: in them alone share the step-time and memory models' evaluation (the exposed communication
#: does not depend on the share of the step it takes: account.fill_step_time predicts at 1 s).
CLOSED_FORM_ONLY = ("step_time", "measured_tokens_per_s")
#: The parameter counts that follow the model's shape (`_params_of_shape`).
PARAM_KEYS = ("activated_params", "total_params")
#: Where a key is the team's own (a scenario file or --set): its parameter counts never follow.
TEAM = ("file", "--set")
#: The columns the models add to a sweep's CSV (after `refused`), each named by its path in
#: `costmodel report --format json` but `mfu_on_predicted_step` (the report's `mfu` when
#: step_time is null).
MODEL_COLUMNS = (
    "scenario.activated_params",
    "scenario.data_parallel",
    "time.predicted_seconds",
    *(f"time.parts.{part}.seconds" for part in step_time.PARTS),
    "mfu_on_predicted_step",
    "memory.total",
    "memory.peak_phase",
    "memory.fits",
)
#: Of MODEL_COLUMNS, those that hold text (the others are numbers).
TEXT_COLUMNS = ("memory.peak_phase", "memory.fits")


def point(base: Scenario, changes: dict[str, Any], before: dict | None = None) -> Scenario | str:
    """The scenario of one sweep point (module docstring), or why the validator refuses it (its
    one-line message). The one place a sweep point is made: the one what-if path
    (costmodel.inputs.what_if), the shape's parameter counts following where they follow
    (`before`: `base_counts(base)`, where the caller has it)."""

    def follow(shape, _values) -> dict[str, int]:
        return _params_of_shape(base, shape, changes, before)

    sc, why = what_if.refusal(base, changes, follow)
    return sc if sc is not None else why


def base_counts(base: Scenario) -> dict:
    """The sweep scenario's shape's parameter counts, as a model config fills them in."""
    return models.scenario_keys(base.shape, base.num_mtp_layers > 0)


def _params_of_shape(base: Scenario, shape, changes, before=None) -> dict[str, int]:
    """activated_params and total_params of the point's model shape (`shape`) where it is not
    the sweep scenario's and neither the team nor the point gives them (a model config fills
    them in so: models.scenario_keys); resolve alone keeps the course's N for another
    hidden_size."""
    if changes.keys() <= RELAID_KEYS:  # the layout alone: the same shape
        return {}
    now = models.scenario_keys(shape, base.num_mtp_layers > 0)  # no sweep varies MTP
    before = before or base_counts(base)
    return {
        key: int(now[key])
        for key in PARAM_KEYS
        if now[key] != before[key] and key not in changes and base.sources.get(key) not in TEAM
    }


@dataclass
class Evaluated:
    """One distinct point's figures: the account's arguments (numeric.ACCOUNT_ARGS, its own
    step or NaN where step_time is null), the predicted step, its parts, the memory, and the
    refusal of a predicted step whose N is not the shape's ("" where none)."""

    arguments: list[float]
    bound: float
    figures: dict[str, Any]
    contradiction: str
    scenario: Scenario


def evaluate_point(sc: Scenario, shape=None) -> Evaluated:
    """The models' figures of a resolved point (`shape`: the sweep scenario's, where the point
    changes only the layout)."""
    return _finished(sc, _model_figures(sc, shape or sc.shape))


def _model_figures(sc: Scenario, shape) -> tuple[list, Any, dict[str, Any]]:
    """The account's arguments, the bound and the figures of `evaluate_point` that the formulas
    give: numbers, or one per point where `sc` holds a group's points as lanes
    (evaluate.sweep.sweep_lanes); `memory.fits` the comparison itself."""
    predicted_sc = sc if sc.step_time is not None else sc.replace(step_time=1.0)
    prediction = step_time.predict(predicted_sc, shape)
    memory = run.memory(sc, shape)
    numbers = sc.numbers()
    linear = linear_attention(sc)
    numbers["F_lin"] = (linear or {}).get("flops_per_step") or 0.0
    if numbers.get("E") == 0:  # a dense model: tokens per expert is undefined (as the account)
        numbers["E"] = math.nan
    figures = {
        "scenario.activated_params": as_float(sc.activated_params),
        "scenario.data_parallel": as_float(sc.data_parallel),
        "time.predicted_seconds": prediction["seconds"],
        **{f"time.parts.{k}.seconds": v for k, v in prediction["parts"].items()},
        "memory.total": as_float(memory["total"]),
        "memory.peak_phase": str(memory["peak_phase"]),
        "memory.fits": memory["fits"],
    }
    arguments = [as_float(numbers.get(name, math.nan)) for name in numeric.ACCOUNT_ARGS]
    bound = account.gemm_peak(sc) / sc.peak_flops if sc.step_time is None else 1.0
    return arguments, bound, figures


def _finished(sc: Scenario, got: tuple[list, Any, dict[str, Any]]) -> Evaluated:
    """One point's Evaluated from its `_model_figures` (numbers)."""
    arguments, bound, figures = got
    predicted = sc.step_time is None
    figures = {**figures, "memory.fits": "true" if figures["memory.fits"] else "false"}
    return Evaluated(
        arguments=arguments,
        bound=bound,
        figures=figures,
        contradiction=(params_contradiction(sc.values) or "") if predicted else "",
        scenario=sc,
    )


def _lanes_apart(got: tuple[list, Any, dict[str, Any]], n: int) -> list[tuple]:
    """Each of a group's n points' `_model_figures` out of the group's (sweep_lanes.columns)."""
    arguments, bound, figures = got
    numbers = [name for name in figures if name not in TEXT_COLUMNS]
    rows = sweep_lanes.columns([*arguments, bound, *(figures[name] for name in numbers)], n)
    fits = np.broadcast_to(np.asarray(figures["memory.fits"], dtype=bool), (n,)).tolist()
    phase = figures["memory.peak_phase"]
    k = len(arguments)
    return [
        (
            row[:k],
            row[k],
            {**dict(zip(numbers, row[k + 1 :])), "memory.peak_phase": phase, "memory.fits": fit},
        )
        for row, fit in zip(rows, fits)
    ]


@dataclass
class Points:
    """The distinct points of a grid (`unique`), each point's index into them (`inverse`), and
    per distinct point its refusal ("" where it resolves) and figures (None where refused)."""

    inverse: np.ndarray
    reasons: list[str]
    evaluated: list[Evaluated | None]


def distinct_points(
    base: Scenario, varied: dict[str, np.ndarray], size: int, keys: list[str]
) -> Points:
    """Each distinct combination of the values of `keys` (the varied keys the models read)
    resolved (`point`) and evaluated once; `varied`: key -> its value at each point."""
    if keys:
        table = np.stack([varied[key].astype(np.float64) for key in keys], axis=1)
        _, first, inverse = np.unique(table, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    else:
        first, inverse = np.zeros(1, dtype=np.int64), np.zeros(size, dtype=np.int64)
    with _collector_paused():
        return _distinct(base, varied, keys, first, inverse)


@contextlib.contextmanager
def _collector_paused():
    """Python's cycle collector off while a grid's scenarios are made: thousands of them stay
    alive, make no cycles, and each collection would walk them all again (a tenth of a shape
    grid's time); on again after, as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _distinct(base, varied, keys, first, inverse) -> Points:
    """`distinct_points`' points resolved and evaluated (sweep_lanes: alike points at once)."""
    relaid = set(keys) <= RELAID_KEYS
    reasons: list[str] = []
    resolved: list[Scenario] = []
    before = base_counts(base)
    for index in first.tolist():
        changes = {key: varied[key][index].item() for key in keys}
        got = point(base, changes, before)
        reasons.append(got if isinstance(got, str) else "")
        if not isinstance(got, str):
            resolved.append(got)
    shapes = [base.shape if relaid else sc.shape for sc in resolved]
    figures = sweep_lanes.evaluate(resolved, shapes, _model_figures, _lanes_apart)
    done = iter(_finished(sc, got) for sc, got in zip(resolved, figures))
    evaluated = [None if reason else next(done) for reason in reasons]
    return Points(inverse, reasons, evaluated)
