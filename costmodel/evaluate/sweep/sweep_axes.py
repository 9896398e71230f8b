"""The axes of a sweep (`costmodel sweep --vary`): which keys can be varied, each --vary read
into its points (a range, rounded to whole numbers for an integer key, or a list), and the checks
of the axes together. Bad input is one line (CostModelError)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from costmodel.errors import CostModelError
from costmodel.evaluate.sweep.sweep_points import CLOSED_FORM_ONLY
from costmodel.formats import shown
from costmodel.inputs.scenario import FIELDS, Scenario, check_value, parse_set

#: The keys of the closed forms: each gives a symbol its value (tokens_per_step and the sum of
#: squared lengths follow samples_per_step and mean_tokens_per_sample). A grid of these alone (and
#: a measured step) is evaluated on the sweep's scenario at once, over arrays.
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
#: Keys a sweep can vary: every numeric scenario key (a key of the closed forms, the model's
#: shape, the layout, an efficiency, ...).
NUMERIC_KEYS = tuple(
    key
    for key, spec in FIELDS.items()
    if spec.kind in ("count", "count0", "positive", "fraction", "efficiency")
)
#: The most points of one grid (the product of every --vary's N).
MAX_POINTS = 1_000_000
#: The most distinct points the step-time and memory models evaluate for one grid (about a
#: millisecond each): the product of the N's of the keys they read.
MAX_MODEL_POINTS = 100_000


@dataclass(frozen=True)
class Axis:
    """One --vary: its points (integers for a key that takes integers), and what was done to
    them (rounded to whole numbers, a repeated value dropped: said on stderr), else ""."""

    key: str
    points: np.ndarray
    note: str = ""

    @property
    def integer(self) -> bool:
        return self.points.dtype.kind == "i"


_RANGE = re.compile(r"^([A-Za-z_]+)=([^:]+):([^:]+):([^:]+)$")
_LIST = re.compile(r"^([A-Za-z_]+)=([^:]+)$")
_FORMS = "KEY=START:STOP:N (e.g. step_time=60:240:50) or KEY=V1,V2,... (e.g. hidden_size=2048,4096)"


def _vary_error(text: str, allowed: str) -> CostModelError:
    return CostModelError(f"--vary: {shown(text)} is not allowed; expected {allowed}")


def _value(text: str, key: str, value: str, what: str):
    """One value of --vary, read as --set reads a value (a YAML scalar), then checked as a
    scenario value is; null is no point of a grid."""
    got = check_value(key, parse_set([f"{key}={value}"])[key])
    if got is None:  # a key that may be null (step_time)
        raise _vary_error(text, f"{what} numbers (null is no value of {key} to vary)")
    return got


def parse_axis(text: str) -> Axis:
    """`KEY=START:STOP:N` or `KEY=V1,V2,...` -> Axis, each value checked as a scenario value
    would be (START and STOP within the key's bounds: every point between is too). An integer
    key's range is rounded to whole numbers, duplicates dropped (`note` says so); a list keeps
    its order, a repeated value dropped. One-line CostModelError."""
    match = _RANGE.match(text.strip()) or _LIST.match(text.strip())
    if match is None:
        raise _vary_error(text, _FORMS)
    key = match[1]
    if key not in NUMERIC_KEYS:
        raise _vary_error(text, f"a key among {', '.join(NUMERIC_KEYS)} (the numeric keys)")
    integer = FIELDS[key].kind in ("count", "count0")
    if match.re is _LIST:
        return _list_axis(text, key, match[2], integer)
    start_text, stop_text, count_text = match[2], match[3], match[4].strip()
    count = int(count_text) if count_text.isascii() and count_text.isdigit() else 0
    if not 1 <= count <= MAX_POINTS or len(count_text) > 7:
        raise _vary_error(text, f"N a whole number from 1 to {MAX_POINTS:,}")
    start, stop = (_value(text, key, value, "START and STOP") for value in (start_text, stop_text))
    if start > stop or (start == stop) != (count == 1):
        raise _vary_error(text, "START < STOP with N > 1, or START = STOP with N = 1")
    if not integer:
        return Axis(key, np.linspace(float(start), float(stop), count))
    if count > 1 and (stop - start) % (count - 1):
        points = np.unique(np.rint(np.linspace(start, stop, count)).astype(np.int64))
        note = (
            f"--vary {shown(text)}: {key} takes whole numbers: the {count:,} points rounded, "
            f"{len(points):,} distinct kept"
        )
        return Axis(key, points, note)
    step = (stop - start) // (count - 1) if count > 1 else 0
    return Axis(key, start + step * np.arange(count, dtype=np.int64))


def _list_axis(text: str, key: str, values_text: str, integer: bool) -> Axis:
    """`KEY=V1,V2,...`: the values in the order given, a repeated one dropped (`note`)."""
    values = [_value(text, key, value, "values that are") for value in values_text.split(",")]
    kept = list(dict.fromkeys(values))
    note = ""
    if len(kept) < len(values):
        note = f"--vary {shown(text)}: {len(values) - len(kept)} repeated value(s) dropped"
    dtype = np.int64 if integer else np.float64
    return Axis(key, np.array(kept, dtype=dtype), note)


def check_axes(
    scenario: Scenario, axes: list[Axis], overrides: dict[str, Any], closed_forms: bool = False
) -> None:
    """Refuse what cannot be swept: a key varied twice or also given by --set, more than
    MAX_POINTS points (or, for the step-time and memory models, MAX_MODEL_POINTS), a length key
    with a lengths file; with `closed_forms` (the closed forms' columns alone), a key they do
    not read or a null step_time not varied."""
    seen: set[str] = set()
    for axis in axes:
        if axis.key in seen or axis.key in overrides:
            also = "varied twice" if axis.key in seen else "also given by --set"
            raise CostModelError(
                f"--vary: {axis.key} ({also}) is not allowed; expected each key once"
            )
        seen.add(axis.key)
        if closed_forms and axis.key not in VARIABLE_KEYS:
            raise CostModelError(
                f"--vary: {axis.key} is not allowed with --closed-forms; expected a key among "
                f"{', '.join(VARIABLE_KEYS)} (the others change the model, the GPU or the "
                "layout, which the closed forms take as fixed)"
            )
    points = math.prod(len(axis.points) for axis in axes)
    if points > MAX_POINTS:
        raise CostModelError(
            f"--vary: {points:,} points is not allowed; expected at most {MAX_POINTS:,} (the "
            "product of the N's)"
        )
    modelled = math.prod(len(a.points) for a in axes if a.key not in CLOSED_FORM_ONLY)
    if not closed_forms and modelled > MAX_MODEL_POINTS:
        raise CostModelError(
            f"--vary: {modelled:,} points for the step-time and memory models is not allowed; "
            f"expected at most {MAX_MODEL_POINTS:,} (the product of the N's of the keys but "
            f"{' and '.join(CLOSED_FORM_ONLY)}), or --closed-forms for the closed forms alone"
        )
    if closed_forms and scenario.step_time is None and "step_time" not in seen:
        raise CostModelError(
            "step_time: null is not allowed with --closed-forms; expected a measured step (the "
            "closed forms divide by it): --set step_time=SECONDS or --vary "
            "step_time=START:STOP:N, or the predicted step without --closed-forms"
        )
    if scenario.sequence_lengths is not None:
        for key in seen & set(LENGTH_KEYS):
            raise CostModelError(
                f"--vary: {key} is not allowed with sequence_lengths; expected a key the "
                "lengths file does not fix (it gives the tokens of a step)"
            )
