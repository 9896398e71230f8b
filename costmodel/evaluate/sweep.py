"""A grid of scenarios evaluated at once: the account's closed forms over the Cartesian product
of a few varied keys (`costmodel sweep`), with NumPy.

The figures are the account's own: its generated numeric forms
(`costmodel.derive.numeric.account_figures`, the source lambdify prints for
`account.EXPRESSIONS`: plain arithmetic, so it takes NumPy arrays as well as numbers), called on
the grid in chunks of CHUNK points, with no SymPy at run time. A varied key gives its symbol an
array, the others keep the scenario's value (as float64: a division by zero gives inf or NaN, as
on an array). `tokens_per_step` (B x mean tokens) and the sum of squared lengths (B x mean^2)
follow the varied keys as `resolve` derives them; the linear-attention core (F_lin, proportional
to the tokens of the step) with them.

Only keys that enter the closed forms as numbers can be varied (VARIABLE_KEYS); the others change
the model, the GPU or the layout, which the closed forms take as fixed. A point `costmodel
report` would refuse keeps its row: its figures are left empty (NaN here) and `refused` says
why, in the order `report` checks (the inputs, then an impossible result: MFU, HFU, the MFU of
the measured throughput or, padded, the HFU of the slots above 100%).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from costmodel.derive import numeric, plain
from costmodel.errors import CostModelError
from costmodel.evaluate.account import EXPRESSIONS, PADDED_UTILIZATION, UTILIZATIONS
from costmodel.evaluate.linear import linear_attention
from costmodel.formats import shown
from costmodel.inputs import layout as layout_rules
from costmodel.inputs.scenario import FIELDS, SYMBOL_OF_KEY, Scenario, check_value, parse_set

#: Keys a sweep can vary: each gives a symbol of the closed forms its value (tokens_per_step and
#: the sum of squared lengths follow samples_per_step and mean_tokens_per_sample).
VARIABLE_KEYS = (
    "step_time",
    "num_gpus",
    "peak_flops",
    "hbm_bandwidth",
    "samples_per_step",
    "mean_tokens_per_sample",
    "seq_len",
    "measured_tokens_per_s",
    "activated_params",
    "total_params",
)
#: Keys whose value a lengths file (`sequence_lengths`) fixes together with the tokens of a step.
LENGTH_KEYS = ("samples_per_step", "mean_tokens_per_sample", "seq_len")
#: The most points of one grid (the product of every --vary's N).
MAX_POINTS = 1_000_000

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
class Axis:
    """One --vary: `count` points from `start` to `stop`, both included (integers for a key
    that takes integers)."""

    key: str
    points: np.ndarray

    @property
    def integer(self) -> bool:
        return self.points.dtype.kind == "i"


@dataclass(frozen=True)
class Grid:
    """The points (row-major over the axes: the last varies fastest) and their figures."""

    axes: tuple[Axis, ...]
    #: column -> values, one per point: the varied keys, tokens_per_step, then FIGURES (NaN where
    #: undefined or refused)
    columns: dict[str, np.ndarray]
    #: why `costmodel report` would refuse each point ("" where it would not)
    refused: np.ndarray

    def __len__(self) -> int:
        return len(self.refused)


_VARY = re.compile(r"^([A-Za-z_]+)=([^:]+):([^:]+):([^:]+)$")


def _vary_error(text: str, allowed: str) -> CostModelError:
    return CostModelError(f"--vary: {shown(text)} is not allowed; expected {allowed}")


def parse_axis(text: str) -> Axis:
    """`KEY=START:STOP:N` -> Axis, the points checked as a scenario value would be (START and
    STOP within the key's bounds: every point between is too); one-line CostModelError."""
    match = _VARY.match(text.strip())
    if match is None:
        raise _vary_error(text, "KEY=START:STOP:N (e.g. step_time=60:240:50)")
    key, start_text, stop_text, count_text = match.groups()
    if key not in VARIABLE_KEYS:
        raise _vary_error(
            text,
            f"a key among {', '.join(VARIABLE_KEYS)} (the others change the model, the GPU or "
            "the layout, which the closed forms take as fixed)",
        )
    count_text = count_text.strip()
    count = int(count_text) if count_text.isascii() and count_text.isdigit() else 0
    if not 1 <= count <= MAX_POINTS or len(count_text) > 7:
        raise _vary_error(text, f"N a whole number from 1 to {MAX_POINTS:,}")
    # each read as --set reads a value (a YAML scalar), then checked as a scenario value is
    start, stop = (
        check_value(key, parse_set([f"{key}={value}"])[key]) for value in (start_text, stop_text)
    )
    if start is None or stop is None:  # a key that may be null (step_time): no point of a grid
        raise _vary_error(text, f"START and STOP numbers (null is no value of {key} to vary)")
    if start > stop or (start == stop) != (count == 1):
        raise _vary_error(text, "START < STOP with N > 1, or START = STOP with N = 1")
    integer = FIELDS[key].kind in ("count", "count0")
    if not integer:
        return Axis(key, np.linspace(float(start), float(stop), count))
    if count > 1 and (stop - start) % (count - 1):
        step = (stop - start) / (count - 1)
        raise _vary_error(
            text,
            f"whole-number points for the integer key {key}: (STOP - START) / (N - 1) a whole "
            f"number (here {step:g})",
        )
    step = (stop - start) // (count - 1) if count > 1 else 0
    return Axis(key, start + step * np.arange(count, dtype=np.int64))


def check_axes(scenario: Scenario, axes: list[Axis], overrides: dict[str, Any]) -> None:
    """Refuse what cannot be swept: a key varied twice or also given by --set, more than
    MAX_POINTS points, a null step_time not varied, a length key with a lengths file."""
    seen: set[str] = set()
    for axis in axes:
        if axis.key in seen or axis.key in overrides:
            also = "varied twice" if axis.key in seen else "also given by --set"
            raise CostModelError(
                f"--vary: {axis.key} ({also}) is not allowed; expected each key once"
            )
        seen.add(axis.key)
    points = math.prod(len(axis.points) for axis in axes)
    if points > MAX_POINTS:
        raise CostModelError(
            f"--vary: {points:,} points is not allowed; expected at most {MAX_POINTS:,} (the "
            "product of the N's)"
        )
    if scenario.step_time is None and "step_time" not in seen:
        raise CostModelError(
            "step_time: null is not allowed; expected a measured step for a sweep (the closed "
            "forms divide by it): --set step_time=SECONDS or --vary step_time=START:STOP:N"
        )
    if scenario.sequence_lengths is not None:
        for key in seen & set(LENGTH_KEYS):
            raise CostModelError(
                f"--vary: {key} is not allowed with sequence_lengths; expected a key the "
                "lengths file does not fix (it gives the tokens of a step)"
            )


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
        refuse((gpus // (tp * pp * cp)) % ep != 0, f"expert_parallel ({ep}) not a divisor of DP")
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


def evaluate_grid(scenario: Scenario, axes: list[Axis]) -> Grid:
    """Every point of the axes' Cartesian product on top of `scenario` (resolved, with its
    --set), evaluated at once; see the module docstring. Call `check_axes` first."""
    axes = tuple(axes)
    varied = _mesh(axes)
    size = math.prod(len(axis.points) for axis in axes)
    batching = scenario.batching
    wanted = {column: key.format(batching=batching) for column, key in FIGURES.items()}
    limits = list(_LIMITS)
    if batching == "padded":
        limits.append(PADDED_UTILIZATION[:2])
    keys = tuple(dict.fromkeys([*wanted.values(), *(key for key, _ in limits)]))
    arguments = _arguments(scenario, varied)
    figures = _figures(arguments, keys, size)
    refused = _refusals(scenario, varied, size)
    for key, label in limits:
        with np.errstate(invalid="ignore"):
            above = figures[key] > 1 + 1e-9  # not float rounding at exactly 100%
        refused[above & (refused == "")] = f"{label} > 100%"
    for key in keys:
        refused[~np.isfinite(figures[key]) & ~np.isnan(figures[key]) & (refused == "")] = (
            f"{key} not finite"
        )
    keep = refused == ""
    columns: dict[str, np.ndarray] = dict(varied)
    tokens = arguments["D"]
    columns["tokens_per_step"] = np.broadcast_to(np.asarray(tokens, dtype=np.float64), (size,))
    for column, key in wanted.items():
        columns[column] = np.where(keep, figures[key], np.nan)
    return Grid(axes, columns, refused)


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
