"""A grid of scenarios evaluated at once: the account's closed forms over the Cartesian product
of a few varied keys (`costmodel sweep`), with NumPy.

The expressions are the account's own (`account.EXPRESSIONS`), lambdified once with
modules="numpy" and called once on the whole grid; a varied key gives its symbol an array, the
others keep the scenario's value. `tokens_per_step` (B x mean tokens) and the sum of squared
lengths (B x mean^2) follow the varied keys as `resolve` derives them; the linear-attention core
(F_lin, proportional to the tokens of the step) with them.

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
import sympy as sp

from costmodel.derive import attention
from costmodel.derive import symbols as sym
from costmodel.errors import CostModelError
from costmodel.evaluate.account import EXPRESSIONS, PADDED_UTILIZATION, UTILIZATIONS
from costmodel.evaluate.linear import linear_attention
from costmodel.formats import shown
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
    if scenario["step_time"] is None and "step_time" not in seen:
        raise CostModelError(
            "step_time: null is not allowed; expected a measured step for a sweep (the closed "
            "forms divide by it): --set step_time=SECONDS or --vary step_time=START:STOP:N"
        )
    if scenario["sequence_lengths"] is not None:
        for key in seen & set(LENGTH_KEYS):
            raise CostModelError(
                f"--vary: {key} is not allowed with sequence_lengths; expected a key the "
                "lengths file does not fix (it gives the tokens of a step)"
            )


_COMPILED: dict[tuple[str, ...], Any] = {}


def _function(keys: tuple[str, ...]):
    """The EXPRESSIONS of `keys` lambdified for NumPy, once per process; and their symbols."""
    if keys not in _COMPILED:
        exprs = [EXPRESSIONS[key] for key in keys]
        args = sorted(set().union(*(e.free_symbols for e in exprs)), key=str)
        # no docstring: printing the expressions into it is most of lambdify's time
        function = sp.lambdify(args, exprs, modules="numpy", docstring_limit=0)
        _COMPILED[keys] = (args, function)
    return _COMPILED[keys]


def _mesh(axes: tuple[Axis, ...]) -> dict[str, np.ndarray]:
    """key -> its value at each point of the Cartesian product (the last axis fastest)."""
    if not axes:
        return {}
    grids = np.meshgrid(*(axis.points for axis in axes), indexing="ij")
    return {axis.key: grid.ravel() for axis, grid in zip(axes, grids)}


def _symbols(scenario: Scenario, varied: dict[str, np.ndarray]) -> dict[sp.Symbol, Any]:
    """Symbol -> a number, or an array over the points for a varied key and what follows it."""
    subs: dict[sp.Symbol, Any] = dict(scenario.substitutions())
    for key, values in varied.items():
        subs[SYMBOL_OF_KEY[key]] = values.astype(np.float64)
    if "samples_per_step" in varied or "mean_tokens_per_sample" in varied:
        batch, mean = subs[sym.B], subs[sym.s_mean]
        subs[sym.D] = np.float64(batch) * mean
        subs[sym.sum_sq] = np.float64(batch) * np.square(np.float64(mean))
    linear = linear_attention(scenario)
    flops = (linear or {}).get("flops_per_step") or 0.0
    # derive.linear_attention.core_training is proportional to D (tests/test_sweep.py checks)
    subs[sym.F_lin] = flops * (subs[sym.D] / scenario["tokens_per_step"])
    if subs.get(sym.E) == 0:  # a dense model: tokens per expert is undefined (as the account)
        subs[sym.E] = math.nan
    return subs


def _refusals(scenario: Scenario, at: dict[str, np.ndarray], size: int) -> np.ndarray:
    """Why `resolve` would refuse each point's inputs ("" where it would not): the relations
    between keys and the layout's divisibility, for the keys a sweep varies."""
    values = scenario.values
    reasons = np.full(size, "", dtype=object)

    def refuse(mask, reason: str) -> None:
        mask = np.broadcast_to(mask, (size,))
        reasons[mask & (reasons == "")] = reason

    def get(key):
        return at.get(key, values[key])

    refuse(get("mean_tokens_per_sample") > get("seq_len"), "mean_tokens_per_sample > seq_len")
    refuse(get("activated_params") > get("total_params"), "activated_params > total_params")
    tp, pp, cp = (values[k] for k in ("tensor_parallel", "pipeline_parallel", "context_parallel"))
    gpus, seq = get("num_gpus"), get("seq_len")
    refuse(gpus % (tp * pp * cp) != 0, f"num_gpus not a multiple of TP x PP x CP ({tp * pp * cp})")
    ep = values["expert_parallel"]
    if values["num_experts"] and scenario.sources.get("expert_parallel") in ("file", "--set"):
        refuse((gpus // (tp * pp * cp)) % ep != 0, f"expert_parallel ({ep}) not a divisor of DP")
    refuse(seq % cp != 0, f"seq_len not a multiple of context_parallel ({cp})")
    if values["sequence_parallel"]:
        refuse((seq // cp) % tp != 0, f"seq_len / CP not a multiple of tensor_parallel ({tp})")
    return reasons


def evaluate_grid(scenario: Scenario, axes: list[Axis]) -> Grid:
    """Every point of the axes' Cartesian product on top of `scenario` (resolved, with its
    --set), evaluated at once; see the module docstring. Call `check_axes` first."""
    axes = tuple(axes)
    varied = _mesh(axes)
    size = math.prod(len(axis.points) for axis in axes)
    batching = scenario["batching"]
    wanted = {column: key.format(batching=batching) for column, key in FIGURES.items()}
    limits = list(_LIMITS)
    if batching == "padded":
        limits.append(PADDED_UTILIZATION[:2])
    keys = tuple(dict.fromkeys([*wanted.values(), *(key for key, _ in limits)]))
    args, function = _function(keys)
    subs = _symbols(scenario, varied)
    # a symbol the scenario leaves unset (tau without a measured throughput) is NaN: undefined
    numbers = function(*(subs.get(symbol, math.nan) for symbol in args))
    with np.errstate(invalid="ignore"):
        figures = {
            key: np.broadcast_to(np.asarray(value, dtype=np.float64), (size,))
            for key, value in zip(keys, numbers)
        }
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
    tokens = subs[sym.D]
    columns["tokens_per_step"] = np.broadcast_to(np.asarray(tokens, dtype=np.float64), (size,))
    for column, key in wanted.items():
        columns[column] = np.where(keep, figures[key], np.nan)
    return Grid(axes, columns, refused)


def conventions(scenario: Scenario) -> str:
    """The conventions of the figures, in words (the CSV's header comment)."""
    values = scenario.values
    model = attention.convention_of(values["attention_flops"], "eager")
    kernel = attention.convention_of(values["attention_flops"], values["attention_kernel"])
    return (
        "fractions, not percent; N = activated_params (matmul parameters per token, no input "
        f"embedding); model FLOPs 6ND; attention core: {attention.CONVENTIONS[model].name}, "
        f"hardware {attention.CONVENTIONS[kernel].name}; batching {values['batching']}; "
        f"recompute {values['recompute']}; peak = peak_flops (dense BF16)"
    )
