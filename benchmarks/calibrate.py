"""Fit efficiency parameters per GPU generation on the published runs (numpy only).

The published runs of ``benchmarks/published_runs.csv`` are split once, by a hash of each row's
id, into the rows efficiencies are fitted on and the held-out rows the benchmark judges a
model by (``split``). ``fit`` takes any predictor with named efficiency parameters and returns,
per GPU generation (ampere, hopper, blackwell), the values that minimise the squared log error
of the predicted step time against the published one on that generation's fitted rows: a
coarse grid, then a pattern search that halves its step down to ``TOLERANCE``.

Two predictors:

- ``baseline``: the trivial model the issue compares against, one constant hardware-FLOP
  efficiency per generation: step = hardware FLOPs of the step / (GPUs x BF16 peak x
  efficiency), the hardware FLOPs as costmodel's account counts them (matmuls with the
  recomputed forward, the attention core by kernel, linear attention: ``hfu_with_attention``
  of the account's attention block times the step, the GPUs and the peak);
- ``model``: ``costmodel.evaluate.simulate.step_time.predict(values)["seconds"]`` with the parameters
  ``gemm_efficiency``, ``attention_efficiency``, ``hbm_efficiency`` passed as scenario overrides
  (only where that module exists).

    python benchmarks/calibrate.py            # the baseline's efficiencies and their rows
    python benchmarks/calibrate.py --model    # the step-time model's (where it exists)
    python benchmarks/calibrate.py --library  # the values costmodel.inputs.fitted records
                                              # (LIBRARY_PARAMETERS)
    python benchmarks/calibrate.py --library --write   # and writes them there (make calibrate)

The printed values and row lists are what the library's efficiency table cites. ``--write``
writes the generated module costmodel/inputs/fitted.py (``render_fitted``): the fitted values
as the numbers the model uses, each with its source; they replace the stated values of
costmodel.inputs.efficiency where a fit exists.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
#: The generated module of the fitted values (``--write``).
FITTED_MODULE = REPO / "costmodel" / "inputs" / "fitted.py"
#: The step-time model's parameters the library records as fitted (costmodel.inputs.fitted):
#: `gemm_scale`, one scale per generation on the stated large-GEMM efficiencies (`gemm` and
#: `gemm_fp8` both: the MAMF figures' BF16/FP8 ratio is kept; each GEMM's shape lowers them
#: further, costmodel.inputs.gemm_efficiency), and `attention`: one scale per generation on the
#: attention kernels' published curves (costmodel.inputs.attention_kernels; forward, backward
#: and eager alike: `fitted_values`), fitted only where the generation has a curve. A parameter
#: is fitted for a generation only on at least MIN_ROWS fitted rows that use it; `hbm` keeps its
#: stated value (a fit moves hbm to unphysical values: it absorbs time the model does not
#: account for).
LIBRARY_PARAMETERS = ("gemm_scale", "attention")
#: The decimals a fitted parameter is written with (the fit stops at a step of TOLERANCE).
DECIMALS = 4
MIN_ROWS = 5
BASELINE_PARAMETERS = ("hardware_flop_efficiency",)
#: The range an efficiency is searched in (a fraction of the peak; the keys allow (0, 1]).
LOWER, UPPER = 0.01, 1.0
GRID_POINTS = 20  # per parameter for one parameter; fewer per axis for more (GRID_BUDGET)
GRID_BUDGET = 400  # grid points in all
TOLERANCE = 1e-4  # the pattern search stops when its step is below this
#: The split's salt: part of the split's definition (changing it reshuffles every row).
SPLIT_SALT = "costmodel-published-runs-v1"

#: A predictor: (row, {parameter: value}) -> seconds per step.
Predictor = Callable[[dict[str, Any], dict[str, float]], float]


def _published():
    """benchmarks/published.py (benchmarks/ is not a package: imported from its folder)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import published

    return published


# ------------------------------------------------------------------------------ split
def generation(gpu: str) -> str:
    """The GPU generation of a card (costmodel.inputs.hardware's table: the one rule the
    step-time model's efficiencies follow), else the card's name in lower case (a generation
    of its own)."""
    from costmodel.inputs import hardware

    card = hardware.lookup(gpu)
    return card.generation if card is not None else gpu.lower()


def is_fitted(row_id: str) -> bool:
    """True for a row efficiencies are fitted on, False for a held-out row: the first byte of
    sha256(SPLIT_SALT + ":" + id) is even. A row's side depends on its id alone, so adding or
    removing rows moves no other row; about half the rows fall on each side."""
    digest = hashlib.sha256(f"{SPLIT_SALT}:{row_id}".encode()).digest()
    return digest[0] % 2 == 0


def split(rows: Iterable[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """(fitted rows, held-out rows), each in the table's order."""
    fitted, held_out = [], []
    for row in rows:
        (fitted if is_fitted(row["id"]) else held_out).append(row)
    return fitted, held_out


# ------------------------------------------------------------------------------ fit
@dataclass
class Fit:
    """The fitted values of one generation and what they were fitted on."""

    generation: str
    values: dict[str, float]
    rows: list[str]  # ids
    rms_log_error: float  # sqrt(mean (ln predicted - ln published)^2) at the values


def _objective(predict: Predictor, rows: Sequence[dict], measured: Sequence[float],
               names: Sequence[str]) -> Callable[[np.ndarray], float]:  # fmt: skip
    logs = np.log(np.asarray(measured, dtype=float))

    def value(x: np.ndarray) -> float:
        params = dict(zip(names, (float(v) for v in x)))
        got = np.array([predict(row, params) for row in rows], dtype=float)
        if not np.all(np.isfinite(got)) or np.any(got <= 0):
            return math.inf
        return float(np.sum((np.log(got) - logs) ** 2))

    return value


def _grid(count: int) -> list[np.ndarray]:
    per_axis = GRID_POINTS if count == 1 else max(3, int(GRID_BUDGET ** (1 / count)))
    axis = np.geomspace(LOWER * 5, UPPER, per_axis)
    return [np.array(point) for point in itertools.product(axis, repeat=count)]


def minimise(objective: Callable[[np.ndarray], float], count: int) -> np.ndarray:
    """The best point of a coarse geometric grid over [LOWER, UPPER]^count, refined by a
    pattern search (each coordinate moved by +-step in log space, the step halved when no move
    helps) until the step is below TOLERANCE; kept inside [LOWER, UPPER]."""
    best = min(_grid(count), key=objective)
    score = objective(best)
    step = math.log(UPPER / LOWER) / GRID_POINTS
    while step > TOLERANCE:
        moved = False
        for axis, sign in itertools.product(range(count), (1.0, -1.0)):
            trial = best.copy()
            trial[axis] = min(UPPER, max(LOWER, trial[axis] * math.exp(sign * step)))
            trial_score = objective(trial)
            if trial_score < score:
                best, score, moved = trial, trial_score, True
        if not moved:
            step /= 2
    return best


def fit(predict: Predictor, rows: Iterable[dict[str, Any]], parameters: Sequence[str],
        measured: Callable[[dict], float] | None = None,
        group: Callable[[dict], str] | None = None) -> dict[str, Fit]:  # fmt: skip
    """Per generation, the parameter values minimising sum (ln predicted - ln published)^2
    over ``rows`` of that generation (the caller passes the rows to fit on: the split's fitted
    half, or benchmarks/loso.py's rows of every other source). ``measured(row)`` gives the
    published seconds (default: ``published.step_time(row)``); rows without one, or that the
    predictor cannot evaluate at the start values, are left out. ``group(row)`` names the fit a
    row belongs to (default: its GPU generation; loso.py pools the generations with too few
    rows for the baseline)."""
    measured = measured or (lambda row: _published().step_time(row)[0])
    key = group or (lambda row: generation(row["gpu"]))
    groups: dict[str, list[tuple[dict, float]]] = {}
    start = dict.fromkeys(parameters, 0.5)
    for row in rows:
        seconds = measured(row)
        if seconds is None or not _evaluable(predict, row, start):
            continue
        groups.setdefault(key(row), []).append((row, seconds))
    fits = {}
    for gen, pairs in sorted(groups.items()):
        group, times = [p[0] for p in pairs], [p[1] for p in pairs]
        objective = _objective(predict, group, times, parameters)
        best = minimise(objective, len(parameters))
        fits[gen] = Fit(gen, dict(zip(parameters, (float(v) for v in best))),
                        [row["id"] for row in group],
                        math.sqrt(objective(best) / len(group)))  # fmt: skip
    return fits


def _evaluable(predict: Predictor, row: dict, params: dict[str, float]) -> bool:
    from costmodel.errors import CostModelError

    try:
        seconds = predict(row, params)
    except CostModelError:
        return False
    return math.isfinite(seconds) and seconds > 0


# ------------------------------------------------------------------------------ predictors
def hardware_flops(row: dict[str, Any]) -> tuple[float, float]:
    """(hardware FLOPs of one step, the cluster's BF16 peak FLOP/s) for a row, as costmodel's
    account counts them: ``attention.actual.hfu_with_attention`` x step x GPUs x peak.
    Raises CostModelError where costmodel cannot evaluate the row."""
    from costmodel.evaluate.account.account import account
    from costmodel.inputs import scenario

    resolved = scenario.resolve(overrides=_published().overrides(row))
    acc = account(resolved)
    values = resolved.values
    peak = values["peak_flops"] * values["num_gpus"]
    hfu = acc["attention"]["actual"]["hfu_with_attention"]
    return hfu * values["step_time"] * peak, peak


def baseline() -> Predictor:
    """One hardware-FLOP efficiency per generation: hardware FLOPs / (peak x efficiency). The
    FLOP counts are worked out once per row and kept."""
    kept: dict[str, tuple[float, float]] = {}

    def predict(row: dict[str, Any], params: dict[str, float]) -> float:
        if row["id"] not in kept:
            kept[row["id"]] = hardware_flops(row)
        flops, peak = kept[row["id"]]
        return flops / (peak * params["hardware_flop_efficiency"])

    return predict


def model_parameters() -> tuple[str, ...]:
    """The step-time model's parameters: the scenario keys that override an efficiency
    (costmodel.inputs.efficiency.OVERRIDES; null = the generation's value)."""
    from costmodel.inputs import efficiency

    return tuple(efficiency.OVERRIDES)


def model_available() -> bool:
    """Whether costmodel's step-time model (issue 20) is installed."""
    return importlib.util.find_spec("costmodel.evaluate.simulate.step_time") is not None


def model() -> Predictor:
    """costmodel's step-time model, its efficiencies passed as scenario keys (a parameter
    absent from ``params`` keeps the library's value). A row's scenario is resolved once, with
    the library's efficiencies, and ``params`` replace their keys in a copy of its values: the
    model reads them from the values (the design of issue 20), and a fit evaluates each row
    hundreds of times. ``params`` are not checked here: the fitter keeps them in (0, 1]."""
    from costmodel.inputs import scenario

    step_time = importlib.import_module("costmodel.evaluate.simulate.step_time")
    kept: dict[str, Any] = {}

    def predict(row: dict[str, Any], params: dict[str, float]) -> float:
        if row["id"] not in kept:
            keys = _published().overrides(row)
            kept[row["id"]] = scenario.resolve(overrides=keys)
        return float(step_time.predict(kept[row["id"]].replace(**params))["seconds"])

    return predict


def fitted_source(gen: str, rows: int, params: dict[str, float]) -> str:
    """Where a generation's fitted values come from (the rows and the fit's parameters)."""
    what = "; ".join(f"{name} {value}" for name, value in params.items())
    return (
        f"fitted on the {rows} {gen} rows of benchmarks/published_runs.csv that "
        f"benchmarks/calibrate.py keeps for fitting and costmodel evaluates ({what}; least squares on ln(step), "
        "the held-out rows untouched; `python benchmarks/calibrate.py --library` lists the rows "
        "and fits again)"
    )


def fitted_values(gen: str, params: dict[str, float], source: str) -> dict[str, tuple[float, str]]:
    """The efficiencies a generation's fitted parameters (LIBRARY_PARAMETERS) give, as
    costmodel.inputs.fitted records them (name -> (value, source)): `gemm` and `gemm_fp8`, the
    stated values times `gemm_scale` (the fit's rule, applied here once, when the values are
    fitted and written: the library derives nothing from the stated values), and `attention`,
    one scale on the generation's published attention curves
    (costmodel.inputs.attention_kernels), recorded as such: costmodel.inputs.efficiency
    multiplies each curve (flash forward, backward, eager) by it at every length."""
    from costmodel.inputs import efficiency, hardware

    stated = efficiency.EFFICIENCIES[gen]
    out = {}
    if "gemm_scale" in params:
        fp8 = any(g.fp8_flops for g in hardware.GPUS.values() if g.generation == gen)
        for name in ("gemm", "gemm_fp8") if fp8 else ("gemm",):  # gemm_fp8 where FP8 runs
            value = stated[name].stated
            out[name] = (
                params["gemm_scale"] * value,
                f"{source}; the stated large-GEMM value {value} x gemm_scale",
            )
    if "attention" in params:
        out["attention"] = (
            params["attention"],
            f"{source}; `attention` is one scale on the published attention curves "
            "(costmodel/inputs/attention_kernels.py), forward, backward and eager alike",
        )
    return out


def with_fitted(gen: str, values: dict[str, tuple[float, str]]) -> dict[str, Any]:
    """The library's table of a generation with `values` (name -> (value, source)) as its
    fitted ones (`attention`: the scale on each attention kernel's curve), every other
    parameter at its stated value."""
    from costmodel.inputs import efficiency

    table = efficiency.EFFICIENCIES[gen]
    out = {
        name: efficiency.Efficiency(e.stated, e.stated_source, *values.get(name, (None, "")))
        for name, e in table.items()
    }
    scale = values.get("attention", (None, ""))
    for name in efficiency.ATTENTION:  # the curves, the scale on them
        e = table[name]
        if e.curve:
            fitted = None if scale[0] is None else scale[0] * e.stated
            out[name] = efficiency.Efficiency(
                e.stated, e.stated_source, fitted, scale[1], e.curve, scale[0]
            )
    return out


def library_model() -> Predictor:
    """The step-time model with LIBRARY_PARAMETERS set as the fitted values of the row's
    generation (costmodel.inputs.efficiency.EFFICIENCIES, that generation's table replaced for
    the call and restored); a parameter absent from ``params`` keeps its stated (unfitted)
    value."""
    from costmodel.inputs import efficiency, scenario

    step_time = importlib.import_module("costmodel.evaluate.simulate.step_time")
    kept: dict[str, Any] = {}

    def predict(row: dict[str, Any], params: dict[str, float]) -> float:
        if row["id"] not in kept:
            kept[row["id"]] = scenario.resolve(overrides=_published().overrides(row))
        values = kept[row["id"]]
        gen = efficiency.generation(values.gpu)
        saved = efficiency.EFFICIENCIES[gen]
        efficiency.EFFICIENCIES[gen] = with_fitted(gen, fitted_values(gen, params, "calibrate.py"))
        try:
            return float(step_time.predict(values)["seconds"])
        finally:
            efficiency.EFFICIENCIES[gen] = saved

    return predict


def library_fit(rows: Iterable[dict[str, Any]], predict: Predictor | None = None) -> dict[str, Fit]:
    """Per generation, the LIBRARY_PARAMETERS that have at least MIN_ROWS fitted rows using
    them, fitted on that generation's rows (``fit``); a generation with none is left out. A
    parameter the fit leaves at a bound of its range is not constrained by the rows (Blackwell's
    MoE-only rows once drove `gemm_fp8` to 1.0 and `attention` to 0.08): it keeps its stated
    value (recorded in UNCONSTRAINED) and the others are fitted again without it.
    ``predict`` (default: a new ``library_model()``) lets repeated fits share one predictor and
    the scenarios it keeps (benchmarks/loso.py fits once per source)."""
    from costmodel.inputs import efficiency

    by_generation: dict[str, list[dict]] = {}
    for row in rows:
        by_generation.setdefault(generation(row["gpu"]), []).append(row)
    predict, fits = predict or library_model(), {}
    UNCONSTRAINED.clear()  # the last call's
    for gen, group in sorted(by_generation.items()):
        curves = any(e.curve for e in efficiency.EFFICIENCIES.get(gen, {}).values())
        used = {"gemm_scale": len(group), "attention": len(group) * curves}
        names = [name for name in LIBRARY_PARAMETERS if used[name] >= MIN_ROWS]
        while names:
            got = fit(predict, group, names).get(gen)
            bound = [n for n in names if got and at_bound(got.values[n])] if got else []
            if not bound:
                if got:
                    fits[gen] = got
                break
            # the rows do not constrain it: its stated value stays, the others are fitted again
            UNCONSTRAINED.setdefault(gen, set()).update(bound)
            names = [n for n in names if n not in bound]
    return fits


#: generation -> the parameters the last library_fit left at a bound of [LOWER, UPPER]: the rows
#: do not constrain them, so they keep their stated values (say so where the fit is printed).
UNCONSTRAINED: dict[str, set[str]] = {}


def at_bound(value: float) -> bool:
    """A fitted value at the edge of the searched range (within a few search steps of it)."""
    return value <= LOWER * (1 + 10 * TOLERANCE) or value >= UPPER * (1 - 10 * TOLERANCE)


# ------------------------------------------------------------------------------ the module
FITTED_HEADER = '''"""GENERATED by benchmarks/calibrate.py --library --write (`make calibrate`): do not edit.

The step-time model's efficiencies fitted on the published runs, per GPU generation: the numbers
the model uses, each with its source. costmodel.inputs.efficiency puts each beside the stated
value of its generation and parameter, which it replaces (derived from nothing at import);
`attention` is one scale on the generation's published attention curves
(costmodel.inputs.attention_kernels), which multiplies each of them at every length.
tests/benchmarks/test_published_step.py fails when this file is not what calibrate writes from
the fitted parameters (PARAMETERS) and the stated values.
"""

# ruff: noqa: E501
'''


def _py(value: Any) -> str:
    """A str, number or dict of them as Python source, as `ruff format` writes it (double
    quotes)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def render_fitted(fits: dict[str, tuple[dict[str, float], int]]) -> str:
    """The text of costmodel/inputs/fitted.py for generation -> (fitted parameters, fitted
    rows): ROWS, PARAMETERS (each rounded to DECIMALS) and FITTED (`fitted_values`)."""
    params = {
        gen: {name: round(value, DECIMALS) for name, value in values.items()}
        for gen, (values, _) in sorted(fits.items())
    }
    rows = {gen: count for gen, (_, count) in sorted(fits.items())}
    fitted = {
        gen: fitted_values(gen, params[gen], fitted_source(gen, rows[gen], params[gen]))
        for gen in params
    }
    lines = [FITTED_HEADER, "#: The fitted rows per generation (the split's; a test counts them).",
             f"ROWS: dict[str, int] = {_py(rows)}", "#: The fitted parameters per generation.",
             "PARAMETERS: dict[str, dict[str, float]] = {"]  # fmt: skip
    lines += [f"    {_py(gen)}: {_py(values)}," for gen, values in params.items()]
    lines += ["}", "#: generation -> parameter -> (fitted value, its source)",
              "FITTED: dict[str, dict[str, tuple[float, str]]] = {"]  # fmt: skip
    for gen, values in fitted.items():
        lines.append(f"    {_py(gen)}: {{")
        for name, (value, source) in values.items():  # as `ruff format` writes them
            lines += [f"        {_py(name)}: (", f"            {value!r},", f"            {_py(source)},",
                      "        ),"]  # fmt: skip
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_fitted(text: str, path: Path = FITTED_MODULE) -> None:
    """Write the generated module atomically, where the file there is one calibrate wrote
    (costmodel.generate.write_generated, the generators' rule)."""
    from costmodel.generate import write_generated

    write_generated(path, text, FITTED_HEADER.split("\n", 1)[0], "fitted module")


# ------------------------------------------------------------------------------ printing
def describe(fits: dict[str, Fit], title: str) -> list[str]:
    lines = [title]
    for fitted in fits.values():
        values = ", ".join(f"{name} {value:.4f}" for name, value in fitted.values.items())
        lines.append(
            f"  {fitted.generation}: {values} (rms log error {fitted.rms_log_error:.3f}, "
            f"{len(fitted.rows)} rows: {', '.join(fitted.rows)})"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    fitted, held_out = split(_published().rows())
    print(
        f"Split of benchmarks/published_runs.csv (sha256 of '{SPLIT_SALT}:<id>', first byte "
        f"even = fitted): {len(fitted)} fitted rows, {len(held_out)} held out"
    )
    if "--library" in argv:
        fits = library_fit(fitted)
        title = "Step-time model: the efficiencies costmodel.inputs.fitted records:"
        if "--write" in argv:
            write_fitted(render_fitted({g: (f.values, len(f.rows)) for g, f in fits.items()}))
            title += f" (written to {FITTED_MODULE.relative_to(REPO)})"
    elif "--model" in argv:
        if not model_available():
            print("costmodel.evaluate.simulate.step_time is not there yet: no model to fit")
            return 1
        fits = fit(model(), fitted, model_parameters())
        title = "Step-time model efficiencies per generation, least squares on ln(step):"
    else:
        fits = fit(baseline(), fitted, BASELINE_PARAMETERS)
        title = "Baseline hardware-FLOP efficiency per generation, least squares on ln(step):"
    for line in describe(fits, title):
        print(line)
    for gen, names in sorted(UNCONSTRAINED.items()):
        print(
            f"  {gen}: {', '.join(sorted(names))} left at a bound by the fit (the rows do not "
            "constrain it): the stated value kept"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
