"""A grid of scenarios (`costmodel sweep`): the account's closed forms over the Cartesian product
of a few varied keys, with NumPy, and beside them the step-time and memory models' figures.

The figures are the account's own: its generated numeric forms
(`costmodel.derive.numeric.account_figures`, the source lambdify prints for
`account.EXPRESSIONS`: plain arithmetic, so it takes NumPy arrays as well as numbers), called on
the grid in chunks of CHUNK points, with no SymPy at run time.

- A grid of the closed forms' keys alone (VARIABLE_KEYS) on a scenario with a measured step: a
  varied key gives its symbol an array, the others keep the scenario's value (as float64: a
  division by zero gives inf or NaN, as on an array). `tokens_per_step` (B x mean tokens) and the
  sum of squared lengths (B x mean^2) follow the varied keys as `resolve` derives them; the
  linear-attention core (F_lin, proportional to the tokens of the step) with them.
- Any other grid: each distinct point is resolved and evaluated by evaluate.sweep.sweep_points (the
  report's scenario with the point's values as --set; its predicted step where step_time is
  null), and the closed forms are called on the points' own arguments.

Either way the models' columns (sweep_points.MODEL_COLUMNS) follow, unless `model` is False
(--closed-forms). A point `costmodel report` would refuse keeps its row: its figures are left
empty (NaN here) and `refused` says why, in the order `report` checks (the inputs, then an
impossible result: MFU, HFU, the MFU of the measured throughput or, padded, the HFU of the slots
above 100%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from costmodel.derive import numeric, plain
from costmodel.evaluate.account.account import (
    EXPRESSIONS,
    PADDED_UTILIZATION,
    UTILIZATIONS,
    predicted_over_peak,
)
from costmodel.evaluate.simulate.linear import linear_attention
from costmodel.evaluate.sweep import sweep_points
from costmodel.evaluate.sweep.sweep_axes import (  # noqa: F401 (the sweep's public names)
    LENGTH_KEYS,
    MAX_MODEL_POINTS,
    MAX_POINTS,
    NUMERIC_KEYS,
    VARIABLE_KEYS,
    Axis,
    check_axes,
    parse_axis,
)
from costmodel.inputs import layout as layout_rules
from costmodel.inputs.scenario import SYMBOL_OF_KEY, Scenario

#: The figures of a grid: column name (its path in `costmodel report --format json`) -> the
#: EXPRESSIONS key it comes from ("{batching}." is the scenario's batching).
FIGURES = {
    "mfu": "mfu",
    "hfu": "hfu",
    "tokens_per_s_per_gpu": "tokens_per_s_per_gpu",
    "tokens_per_s": "tokens_per_s",
    "model_flops_per_step": "model_flops_per_step",
    "hardware_flops_per_step": "hardware_flops_per_step",
    "achieved_flops_per_s_per_gpu": "achieved_flops_per_s_per_gpu",
    "mfu_if_total_params": "mfu_if_total_params",
    "mfu_from_measured_tokens_per_s": "mfu_from_measured_tokens_per_s",
    "padding.useful_fraction": "{batching}.useful_fraction",
    "padding.mfu_after_packing": "{batching}.mfu_after_packing",
    "attention.actual.share": "share_actual",
    "attention.actual.mfu_with_attention": "mfu_with_attention_actual",
    "attention.actual.hfu_with_attention": "hfu_with_attention_actual",
    "machine_balance": "machine_balance",
}
#: Checked for an impossible result (above 100%): the account's own list, by EXPRESSIONS key.
_LIMITS = [(key, label) for key, label, _ in UTILIZATIONS]


@dataclass(frozen=True)
class Grid:
    """The points (row-major over the axes: the last varies fastest) and their figures."""

    axes: tuple[Axis, ...]
    #: column -> values, one per point: the varied keys, tokens_per_step, then FIGURES (NaN where
    #: undefined or refused)
    columns: dict[str, np.ndarray]
    #: why `costmodel report` would refuse each point ("" where it would not)
    refused: np.ndarray
    #: column -> values, one per point, after `refused`: the step-time and memory models'
    #: (evaluate.sweep.sweep_points.MODEL_COLUMNS; NaN or "" where refused), none with --closed-forms
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.refused)


#: Points evaluated at once: the generated forms give every figure of the account, so a chunk
#: bounds what they hold (about 40 arrays of CHUNK floats).
CHUNK = 1 << 16


def _mesh(axes: tuple[Axis, ...]) -> dict[str, np.ndarray]:
    """key -> its value at each point of the Cartesian product (the last axis fastest)."""
    if not axes:
        return {}
    grids = np.meshgrid(*(axis.points for axis in axes), indexing="ij")
    return {axis.key: grid.ravel() for axis, grid in zip(axes, grids)}


def _arguments(scenario: Scenario, varied: dict[str, np.ndarray]) -> dict[str, Any]:
    """Symbol name -> a float64, or an array over the points for a varied key and what follows
    it (the names of numeric.ACCOUNT_ARGS; a symbol the scenario leaves unset, tau without a
    measured throughput, is NaN: undefined)."""
    numbers = scenario.numbers()
    for key, values in varied.items():
        numbers[SYMBOL_OF_KEY[key]] = values.astype(np.float64)
    if "samples_per_step" in varied or "mean_tokens_per_sample" in varied:
        batch, mean = np.float64(numbers["B"]), np.float64(numbers["s_mean"])
        numbers["D"] = batch * mean
        numbers["sum_sq"] = batch * np.square(mean)
    linear = linear_attention(scenario)
    flops = (linear or {}).get("flops_per_step") or 0.0
    # derive.linear_attention.core_training is proportional to D (tests/evaluate/test_sweep.py)
    numbers["F_lin"] = flops * (np.float64(numbers["D"]) / scenario.tokens_per_step)
    if numbers.get("E") == 0:  # a dense model: tokens per expert is undefined (as the account)
        numbers["E"] = math.nan
    return {
        name: np.float64(value) if np.ndim(value) == 0 else value
        for name, value in ((n, numbers.get(n, math.nan)) for n in numeric.ACCOUNT_ARGS)
    }


def _figures(arguments: dict[str, Any], keys: tuple[str, ...], size: int) -> dict[str, np.ndarray]:
    """EXPRESSIONS key -> its value at each point, for `keys`: the generated forms called on
    CHUNK points at a time (an argument that is one number stays one)."""
    index = [EXPRESSIONS.index(key) for key in keys]
    figures = {key: np.empty(size, dtype=np.float64) for key in keys}
    for start in range(0, size, CHUNK):
        part = slice(start, min(start + CHUNK, size))
        args = [value if np.ndim(value) == 0 else value[part] for value in arguments.values()]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            values = numeric.account_figures(*args)
        for key, i in zip(keys, index):
            figures[key][part] = values[i]
    return figures


def _refusals(scenario: Scenario, at: dict[str, np.ndarray], size: int) -> np.ndarray:
    """Why `resolve` would refuse each point's inputs ("" where it would not): the relations
    between keys and the layout's divisibility, for the keys a sweep varies."""
    reasons = np.full(size, "", dtype=object)

    def refuse(mask, reason: str) -> None:
        mask = np.broadcast_to(mask, (size,))
        reasons[mask & (reasons == "")] = reason

    def get(key):
        return at.get(key, scenario.values[key])

    refuse(get("mean_tokens_per_sample") > get("seq_len"), "mean_tokens_per_sample > seq_len")
    refuse(get("activated_params") > get("total_params"), "activated_params > total_params")
    layout = scenario.layout
    tp, pp, cp = layout.tensor_parallel, layout.pipeline_parallel, layout.context_parallel
    gpus, seq = get("num_gpus"), get("seq_len")
    refuse(gpus % (tp * pp * cp) != 0, f"num_gpus not a multiple of TP x PP x CP ({tp * pp * cp})")
    ep = scenario.expert_parallel
    if scenario.num_experts and scenario.sources.get("expert_parallel") in ("file", "--set"):
        etp = scenario.expert_tensor_parallel  # MoE parallel folding: over TP x CP x DP
        if etp is None:
            refuse(
                (gpus // (tp * pp * cp)) % ep != 0, f"expert_parallel ({ep}) not a divisor of DP"
            )
        else:
            refuse(
                (gpus // pp) % (etp * ep) != 0,
                f"expert_tensor_parallel x expert_parallel ({etp} x {ep}) not a divisor of "
                "TP x CP x DP",
            )
    refuse(
        np.logical_not(layout_rules.cp_divides(seq, cp)),
        f"seq_len not a multiple of context_parallel (x 2 with CP: {2 * cp if cp > 1 else 1})",
    )
    if scenario.sequence_parallel:
        refuse((seq // cp) % tp != 0, f"seq_len / CP not a multiple of tensor_parallel ({tp})")
    refuse(~_enough_micro_batches(scenario, get, gpus // (tp * pp * cp)), _FEW[scenario.batching])
    if scenario.sources.get("ce_chunks") in ("file", "--set"):
        most = layout_rules.ce_chunks_most(scenario.micro_batch, seq, cp)
        refuse(scenario.ce_chunks > most, "ce_chunks > micro_batch x seq_len / context_parallel")
    return reasons


#: Why a point has fewer micro batches than pipelines, by batching.
_FEW = {
    "padded": "data_parallel x micro_batch > samples_per_step",
    "packed": "data_parallel > samples_per_step",
}


def _enough_micro_batches(scenario: Scenario, get, dp) -> np.ndarray:
    """At least one micro batch per pipeline and step at each point (inputs.layout's rule as
    `resolve` applies it: padded, the samples over DP pipelines of micro_batch samples; packed,
    a document per pipeline). `get(key)` is a point's value of a key."""
    samples = np.asarray(get("samples_per_step"), dtype=np.float64)
    if scenario.batching == "padded":
        micro = samples / (dp * scenario.micro_batch)
        return np.asarray(layout_rules.enough_micro_batches(micro))
    return np.asarray(layout_rules.enough_micro_batches(None, "packed", samples, dp))


def _wanted(batching: str) -> tuple[dict[str, str], list[tuple[str, str]], tuple[str, ...]]:
    """(column -> EXPRESSIONS key, the limits checked as (key, label), every key evaluated)."""
    wanted = {column: key.format(batching=batching) for column, key in FIGURES.items()}
    limits = list(_LIMITS)
    if batching == "padded":
        limits.append(PADDED_UTILIZATION[:2])
    keys = tuple(dict.fromkeys([*wanted.values(), *(key for key, _ in limits)]))
    return wanted, limits, keys


def evaluate_grid(scenario: Scenario, axes: list[Axis], model: bool = True) -> Grid:
    """Every point of the axes' Cartesian product on top of `scenario` (resolved, with its
    --set); see the module docstring. A grid of the closed forms' keys alone, with a measured
    step, is evaluated on `scenario` at once; any other point is resolved and evaluated by
    evaluate.sweep.sweep_points, and so are the models' columns (`model`: False, --closed-forms, for
    none). Call `check_axes` first."""
    axes = tuple(axes)
    varied = _mesh(axes)
    size = math.prod(len(axis.points) for axis in axes)
    measured = scenario.step_time_from == "measured"
    closed = measured and all(a.key in VARIABLE_KEYS for a in axes)
    if not model:
        return _closed_grid(scenario, axes, varied, size)
    keys = [a.key for a in axes if a.key not in sweep_points.CLOSED_FORM_ONLY]
    points = sweep_points.distinct_points(scenario, varied, size, keys)
    if closed:
        return _with_model(_closed_grid(scenario, axes, varied, size), scenario, varied, points)
    return _model_grid(scenario, axes, varied, size, points)


def _closed_grid(scenario: Scenario, axes: tuple[Axis, ...], varied, size: int) -> Grid:
    """The closed forms over arrays on `scenario` (a measured step), the refusals as `resolve`
    and `account` give them (`_refusals`, the limits)."""
    wanted, limits, keys = _wanted(scenario.batching)
    arguments = _arguments(scenario, varied)
    figures = _figures(arguments, keys, size)
    refused = _refusals(scenario, varied, size)
    _judge(figures, keys, limits, refused)
    keep = refused == ""
    columns: dict[str, np.ndarray] = dict(varied)
    tokens = arguments["D"]
    columns["tokens_per_step"] = np.broadcast_to(np.asarray(tokens, dtype=np.float64), (size,))
    for column, key in wanted.items():
        columns[column] = np.where(keep, figures[key], np.nan)
    return Grid(axes, columns, refused)


def _judge(figures, keys, limits, refused: np.ndarray, bound=1.0, over_peak=None) -> None:
    """Refuse, in place, an impossible result: a utilization above `bound` (1; a predicted
    step's, the peak its GEMMs run at: account.check_possible), then a figure not finite.
    `over_peak(mask, key, label)`: the account's line for a predicted step's, else
    `LABEL > 100%`."""
    for key, label in limits:
        with np.errstate(invalid="ignore"):
            above = figures[key] > bound * (1 + 1e-9)  # not float rounding at exactly 100%
        mask = above & (refused == "")
        if over_peak is not None:
            over_peak(mask, key, label)
        refused[mask & (refused == "")] = f"{label} > 100%"
    for key in keys:
        refused[~np.isfinite(figures[key]) & ~np.isnan(figures[key]) & (refused == "")] = (
            f"{key} not finite"
        )


def _with_model(grid: Grid, scenario: Scenario, varied, points) -> Grid:
    """A closed forms' grid with the models' columns; a point their scenario refuses (and the
    closed forms' checks do not) refused too, its figures emptied."""
    reasons = np.array(points.reasons, dtype=object)[points.inverse]
    refused = grid.refused
    newly = (refused == "") & (reasons != "")
    refused[newly] = reasons[newly]
    keep = refused == ""
    for column in FIGURES:
        grid.columns[column] = np.where(keep, grid.columns[column], np.nan)
    arguments = _arguments(scenario, varied)
    extra = _model_columns(points, keep, arguments, len(refused))
    return Grid(grid.axes, grid.columns, refused, extra)


def _model_grid(scenario: Scenario, axes, varied, size: int, points) -> Grid:
    """Every point resolved (sweep_points.point) and evaluated: the closed forms on each point's
    arguments, its step the measured one or, where step_time is null, the predicted one (as the
    report fills it, with its refusals: an N not the shape's, a result above the GEMMs' peak)."""
    wanted, limits, keys = _wanted(scenario.batching)
    inverse, evaluated = points.inverse, points.evaluated
    table = np.full((len(evaluated), len(numeric.ACCOUNT_ARGS)), np.nan)
    bound_u = np.ones(len(evaluated))
    for u, ev in enumerate(evaluated):
        if ev is not None:
            table[u], bound_u[u] = ev.arguments, ev.bound
    step = numeric.ACCOUNT_ARGS.index(SYMBOL_OF_KEY["step_time"])
    null_u = np.isnan(table[:, step]) & np.array([ev is not None for ev in evaluated])
    table[null_u, step] = _predicted(points)[null_u]
    arguments = {name: _spread(table[:, j], inverse) for j, name in enumerate(numeric.ACCOUNT_ARGS)}
    for key in sweep_points.CLOSED_FORM_ONLY:
        if key in varied:
            arguments[SYMBOL_OF_KEY[key]] = varied[key].astype(np.float64)
    figures = _figures(arguments, keys, size)
    refused = np.array(points.reasons, dtype=object)[inverse]
    predicted = null_u[inverse] & ("step_time" not in varied)
    contradictions = np.array([ev.contradiction if ev else "" for ev in evaluated], dtype=object)
    mask = predicted & (refused == "")
    refused[mask] = contradictions[inverse][mask]
    bound = np.where(predicted, bound_u[inverse], 1.0)
    over_peak = _over_peak(points, predicted, figures, bound, refused)
    _judge(figures, keys, limits, refused, bound, over_peak)
    keep = refused == ""
    columns: dict[str, np.ndarray] = dict(varied)
    tokens = np.broadcast_to(np.asarray(arguments["D"], dtype=np.float64), (size,))
    columns["tokens_per_step"] = np.where(keep, tokens, np.nan)
    for column, key in wanted.items():
        columns[column] = np.where(keep, figures[key], np.nan)
    return Grid(axes, columns, refused, _model_columns(points, keep, arguments, size))


def _over_peak(points, predicted, figures, bound, refused):
    """The `over_peak` of `_judge` for a grid of predicted steps: the account's line
    (account.predicted_over_peak) for a figure that rests on the step, one per distinct point."""
    by_key = {key: inputs for key, _, inputs in (*UTILIZATIONS, PADDED_UTILIZATION)}
    lines: dict[tuple[int, str], str] = {}

    def over_peak(mask, key, label) -> None:
        if "step_time" not in by_key[key]:
            return
        for i in np.flatnonzero(mask & predicted).tolist():
            u = int(points.inverse[i])
            if (u, key) not in lines:
                value = float(figures[key][i] / bound[i])
                sc = points.evaluated[u].scenario
                lines[u, key] = predicted_over_peak(sc, label, value)
            refused[i] = lines[u, key]

    return over_peak


def _predicted(points) -> np.ndarray:
    """The predicted step of each distinct point (NaN where refused)."""
    return np.array(
        [ev.figures["time.predicted_seconds"] if ev else np.nan for ev in points.evaluated]
    )


def _spread(values: np.ndarray, inverse: np.ndarray):
    """A distinct points' column at each point: one float64 where they all agree."""
    if len(values) and np.all(values == values[0]):
        return np.float64(values[0])
    return values[inverse]


def _model_columns(points, keep: np.ndarray, arguments: dict[str, Any], size: int) -> dict:
    """sweep_points.MODEL_COLUMNS at each point (NaN or "" where refused); MFU on the
    predicted step is the account's MFU with the predicted step as its step."""
    inverse, evaluated = points.inverse, points.evaluated
    step = SYMBOL_OF_KEY["step_time"]
    on_predicted = {**arguments, step: _predicted(points)[inverse]}
    extra: dict[str, np.ndarray] = {}
    for column in sweep_points.MODEL_COLUMNS:
        if column == "mfu_on_predicted_step":
            values = _figures(on_predicted, ("mfu",), size)["mfu"]
        elif column in sweep_points.TEXT_COLUMNS:
            values = np.array([ev.figures[column] if ev else "" for ev in evaluated], dtype=object)
            extra[column] = np.where(keep, values[inverse], "")
            continue
        else:
            values = np.array([ev.figures[column] if ev else np.nan for ev in evaluated])[inverse]
        extra[column] = np.where(keep, values, np.nan)
    return extra


def conventions(scenario: Scenario) -> str:
    """The conventions of the figures, in words (the CSV's header comment)."""
    model = plain.convention_of(scenario.attention_flops, "eager")
    kernel = plain.convention_of(scenario.attention_flops, scenario.attention_kernel)
    return (
        "fractions, not percent; N = activated_params (matmul parameters per token, no input "
        f"embedding); model FLOPs 6ND; attention core: {numeric.CONVENTION_NAMES[model]}, "
        f"hardware {numeric.CONVENTION_NAMES[kernel]}; batching {scenario.batching}; "
        f"recompute {scenario.recompute}; peak = peak_flops (dense BF16)"
    )
