"""Memory verdicts and step times on the published runs of ``benchmarks/published_runs.csv``.

Memory. Every run in the table trained, so each must fit under the settings its row states. For
each row this prints the peak of the most loaded GPU (``costmodel.evaluate.simulate.run.memory``), the
phase that sets it, the usable capacity and the verdict; where the source prints the memory it
measured, the prediction beside it and their ratio. A row that does not fit, or that costmodel
cannot evaluate, must be named in ``EXPLAINED``: the convention that explains the difference and
the settings under which the row fits, which are evaluated too.

Step time (issue 20). Per row: the published step time (printed, or derived from the printed
tokens/s or TFLOP/s: ``published.step_time``), the step each predictor gives, its relative error
(predicted / published - 1) and the utilization under the row's own FLOP convention (the
printed MFU or HFU, or the source's formula against the row's peak) at the published and the
predicted step. Then, for the rows the efficiencies are fitted on and for the held-out rows
(``calibrate.split``: a hash of the id), the median and the 90th percentile of |error| of:

- ``baseline``: one hardware-FLOP efficiency per GPU generation, fitted here on the fitted rows
  (``calibrate.fit``);
- ``model``: ``costmodel.evaluate.simulate.step_time.predict`` with the library's efficiencies, where
  that module exists (otherwise a line says it is not there yet).

Last, Korthikanti et al.'s Table 5 rows against what the Calculon simulator's own validation
prints for them (``CALCULON``).

    python benchmarks/published_runs.py          # both tables and their summaries
    python benchmarks/published_runs.py --csv    # the memory table as CSV on stdout
    python benchmarks/published_runs.py --steps-csv    # the step-time table as CSV

``verdicts()`` is what tests/benchmarks/test_published_fit.py checks: the rows the issue names fit
as stated, every other row fits or is explained, and every explanation makes its row fit;
``steps()`` and ``error_stats()`` what tests/benchmarks/test_published_step.py checks.
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from costmodel.errors import CostModelError
from costmodel.evaluate.simulate.run import memory
from costmodel.inputs import scenario

GIB = 2**30


def _calibrate():
    """benchmarks/calibrate.py, imported from its folder as published.py is."""
    _published()
    import calibrate

    return calibrate


def _published():
    """benchmarks/published.py (benchmarks/ is not a package: imported from its folder)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import published

    return published


#: The rows issue 19 names: they must fit exactly as the table states them.
REQUIRED = (
    "llama3-405b-8k-8192gpu",
    "llama3-405b-8k-16384gpu",
    "llama3-405b-131k-16384gpu",
    "deepseek-v3-2048xh800",
    "korthikanti-175b-selective",
    "korthikanti-530b-selective",
    "korthikanti-1t-selective",
    "torchtitan-2404-a100-llama3-8b-sel-op",
    "torchtitan-2404-a100-llama3-70b-full",
    "megatron-bridge-2604-qwen3-30b-a3b-h100-fp8",
    "megatron-bridge-2604-qwen3-235b-a22b-b200-mxfp8",
)

_PER_OP_SAC = (
    "torchtitan's per-op selective activation checkpointing (it saves the output of every "
    "other matmul and of SDPA, and recomputes the rest) has no Megatron-LM module set: it lies "
    "between recompute_modules [core_attn] (what the row maps it to, an upper bound) and "
    "[core_attn, layernorm, mlp] (every MLP intermediate recomputed, a lower bound); the "
    "explanation evaluates the lower bound"
)
_SAC_BOUND = {"recompute_modules": ["core_attn", "layernorm", "mlp"]}

_INTERLEAVED_WARMUP = (
    "interleaved warm-up: costmodel counts Megatron-LM's interleaved schedule on the first stage, "
    "p + (p - 1)/V micro batches of a stage's layers in flight (V 8: 8.875 for PP 8); the "
    "recipe counts the embedding and the loss as layers of the split (the row's "
    "pipeline_split): costmodel then holds 15 layers on the first stage, not 16, but counts "
    "each in-flight micro batch over all 15, while the first chunk, which holds the most micro "
    "batches (14 of 70 in flight), has one layer instead of two; the explanation evaluates "
    "1F1B's p in flight, a tenth less (8 of 8.875)"
)
_INTERLEAVED_FIRST_STAGE = {"pipeline_schedule": "1f1b", "virtual_pipeline": None}

#: Rows that do not fit as stated, or cannot be evaluated: the named convention that explains
#: it and the changes (scenario keys) under which the row is evaluated again; None where
#: costmodel cannot evaluate the row at all.
EXPLAINED: dict[str, tuple[dict[str, Any] | None, str]] = {
    "torchtitan-2404-a100-llama2-70b-sel-op": (_SAC_BOUND, _PER_OP_SAC),
    "torchtitan-2412-8b-8gpu-fsdp": (
        _SAC_BOUND,
        _PER_OP_SAC + "; the run's card has 96 GB (the source measured more than 80 GB), the "
        "table stands it in as H100-SXM (80 GB) for want of its peak",
    ),
    "torchtitan-2412-8b-8gpu-fsdp-compile": (
        _SAC_BOUND,
        _PER_OP_SAC + "; a 96 GB card stood in as H100-SXM, as above",
    ),
    "torchtitan-2412-8b-8gpu-fsdp-compile-float8": (
        _SAC_BOUND,
        _PER_OP_SAC + "; a 96 GB card stood in as H100-SXM, as above",
    ),
    "dgxc-2502-nemotron4-340b-bf16-128gpu": (
        {"context_parallel": 2, "memory_reserve": 2**30},
        "context parallelism: the release's configure.sh sets CP 2 for BF16 while the README's "
        "header prints none (the row records CP 1, the only value its printed GA 16 allows); "
        "with CP 2 the activations halve; and memory_reserve: its interleaved schedule (V 12) "
        "holds (p - 1)/V micro batches more than 1F1B, and the peak then exceeds the usable "
        "bytes by less than the 2 GiB the memory model sets aside (an assumption): with 1 GiB "
        "set aside it fits",
    ),
    "dgxc-2502-nemotron4-340b-fp8-128gpu": (
        {"context_parallel": 2, "memory_reserve": 2**30},
        "context parallelism: CP 2 in the release's configure.sh, and memory_reserve, as for "
        "the BF16 row",
    ),
    "dgxc-2505-llama31-405b-bf16-512gpu": (_INTERLEAVED_FIRST_STAGE, _INTERLEAVED_WARMUP),
    "dgxc-2505-llama31-405b-fp8-512gpu": (_INTERLEAVED_FIRST_STAGE, _INTERLEAVED_WARMUP),
}


@dataclass
class Verdict:
    row: dict[str, Any]
    peak: float | None  # bytes, as stated
    capacity: float | None
    phase: str | None
    fits: bool | None  # None: not evaluable
    error: str | None
    explained: str | None
    peak_explained: float | None
    fits_explained: bool | None

    @property
    def id(self) -> str:
        return self.row["id"]

    @property
    def measured(self) -> float | None:
        gib = self.row.get("memory_gib")
        return gib * GIB if gib else None


def _evaluate(keys: dict[str, Any]) -> dict[str, Any]:
    return memory(scenario.resolve(overrides=keys), fit=False)


def verdict(row: dict[str, Any]) -> Verdict:
    pub = _published()
    keys = pub.overrides(row)
    got = dict.fromkeys(("peak", "capacity", "phase", "fits", "error"))
    try:
        mem = _evaluate(keys)
        got.update(
            peak=mem["total"], capacity=mem["capacity"], phase=mem["peak_phase"], fits=mem["fits"]
        )
    except CostModelError as error:
        got["error"] = str(error)
    changes, why = EXPLAINED.get(row["id"], (None, None))
    peak_explained = fits_explained = None
    if changes is not None:
        mem = _evaluate({**keys, **changes})
        peak_explained, fits_explained = mem["total"], mem["fits"]
    return Verdict(row, **got, explained=why, peak_explained=peak_explained,
                   fits_explained=fits_explained)  # fmt: skip


def verdicts() -> list[Verdict]:
    return [verdict(row) for row in _published().rows()]


def _gib(x: float | None) -> str:
    return "" if x is None else f"{x / GIB:.1f}"


def table(found: list[Verdict]) -> list[list[str]]:
    header = ["id", "gpu", "peak GiB", "phase", "usable GiB", "verdict", "measured GiB",
              "predicted/measured", "explained: peak GiB", "explanation"]  # fmt: skip
    out = [header]
    for v in found:
        verdict_text = "not evaluable" if v.error else "fits" if v.fits else "does not fit"
        ratio = f"{v.peak / v.measured:.2f}" if v.measured and v.peak else ""
        explained = _gib(v.peak_explained)
        if v.fits_explained is not None:
            explained += " (fits)" if v.fits_explained else " (does not fit)"
        out.append([v.id, v.row["gpu"], _gib(v.peak), v.phase or "", _gib(v.capacity),
                    verdict_text, _gib(v.measured), ratio, explained,
                    v.explained or v.error or ""])  # fmt: skip
    return out


def summary(found: list[Verdict]) -> list[str]:
    fit = [v for v in found if v.fits]
    unexplained = [v for v in found if not v.fits and not v.explained]
    ratios = [v.peak / v.measured for v in found if v.measured and v.peak]
    lines = [
        f"{len(found)} published runs; {len(fit)} fit as stated; "
        f"{len(found) - len(fit) - len(unexplained)} explained by a named convention; "
        f"{len(unexplained)} unexplained",
        "required rows (issue 19): "
        + ", ".join(f"{v.id} {_gib(v.peak)} GiB" for v in found if v.id in REQUIRED),
    ]
    if ratios:
        lines.append(
            f"predicted / measured peak over the {len(ratios)} rows whose source prints its "
            f"memory: median {statistics.median(ratios):.2f}, range {min(ratios):.2f}-"
            f"{max(ratios):.2f} (the sources print max reserved: the allocator's cache included)"
        )
    return lines


# ------------------------------------------------------------------------------ step time
#: What the Calculon simulator's own validation prints for Korthikanti et al.'s Table 5
#: (calculon-ai/calculon at caa4b11, ``PYTHONPATH=. ./bin/calculon llm-validation``, its
#: "End-to-end" table; published_runs.md, "Calculon"): row id -> (Calculon's seconds, the
#: printed Delta = 1 - calc / profile, a fraction). Printed Ave 3.65%, Max 8.87%.
CALCULON: dict[str, tuple[float, float]] = {
    "korthikanti-22b-full": (1.40, 0.0172),
    "korthikanti-22b-selective": (1.14, -0.0333),
    "korthikanti-175b-full": (18.03, 0.0056),
    "korthikanti-175b-selective": (13.64, 0.0081),
    "korthikanti-530b-full": (49.89, -0.0172),
    "korthikanti-530b-selective": (34.47, 0.0887),
    "korthikanti-1t-full": (90.08, 0.0460),
    "korthikanti-1t-selective": (66.04, 0.0762),
}
CALCULON_MEAN = 0.0365  # its printed "Ave"

#: The FLOP formulas that count the recomputed forward: their utilization is an HFU.
HARDWARE_FORMULAS = frozenset({"megatron_gpt_96", "megatron_deepspeed_hfu"})


@dataclass
class Step:
    """One row's published step time and what each predictor gives for it."""

    row: dict[str, Any]
    fitted: bool  # calibrate.split: efficiencies fitted on this row (else held out)
    generation: str
    published: float | None  # seconds
    how: str  # how the published seconds were obtained (published.step_time)
    predicted: dict[str, float | None]  # predictor -> seconds (None: not evaluable)
    error: str | None  # why costmodel cannot evaluate the row

    @property
    def id(self) -> str:
        return self.row["id"]

    def relative_error(self, predictor: str) -> float | None:
        seconds = self.predicted.get(predictor)
        if seconds is None or not self.published:
            return None
        return seconds / self.published - 1


def utilization(row: dict[str, Any], published: float, seconds: float) -> tuple[str, float] | None:
    """(kind, utilization at ``seconds``) under the row's own FLOP convention: the printed MFU,
    else the printed HFU, else the source's formula (``published.flops_per_token``) or the
    printed TFLOP/s per GPU against the row's peak (``peak_tflops``, else the card's BF16 peak).
    The convention fixes the FLOPs of a step, so the utilization scales as published /
    seconds. None where the row gives no way to count."""
    from costmodel.inputs import hardware

    pub = _published()
    peak = (row["peak_tflops"] or hardware.GPUS[row["gpu"]].bf16_flops / 1e12) * 1e12
    kind = "HFU" if row["flop_formula"] in HARDWARE_FORMULAS else "MFU"
    per_token = pub.flops_per_token(row)
    if row["mfu"]:
        kind, at_published = "MFU", row["mfu"]
    elif row["hfu"]:
        kind, at_published = "HFU", row["hfu"]
    elif per_token:
        at_published = per_token * pub.tokens_per_step(row) / (published * row["num_gpus"] * peak)
    elif row["tflops_per_gpu"]:
        at_published = row["tflops_per_gpu"] * 1e12 / peak
    else:
        return None
    return kind, at_published * published / seconds


def error_stats(errors: list[float]) -> tuple[float, float] | None:
    """(median, 90th percentile) of |error| (numpy's linear interpolation between order
    statistics); None for no errors."""
    import numpy as np

    if not errors:
        return None
    magnitudes = np.abs(np.asarray(errors, dtype=float))
    return float(np.median(magnitudes)), float(np.percentile(magnitudes, 90))


def predictors() -> tuple[dict[str, Any], dict[str, Any]]:
    """({name: predictor(row) -> seconds}, {name: per-generation fits}): the baseline fitted on
    the fitted rows, and the step-time model with the library's efficiencies where it exists."""
    cal = _calibrate()
    fitted, _ = cal.split(_published().rows())
    base = cal.baseline()
    fits = {"baseline": cal.fit(base, fitted, cal.BASELINE_PARAMETERS)}

    def baseline(row: dict[str, Any]) -> float | None:
        found = fits["baseline"].get(cal.generation(row["gpu"]))
        return None if found is None else base(row, found.values)

    found: dict[str, Any] = {"baseline": baseline}
    if cal.model_available():
        model = cal.model()
        found["model"] = lambda row: model(row, {})
    return found, fits


def step(row: dict[str, Any], predict: dict[str, Any]) -> Step:
    cal = _calibrate()
    published, how = _published().step_time(row)
    predicted: dict[str, float | None] = dict.fromkeys(predict)
    error = None
    for name, function in predict.items():
        try:
            predicted[name] = function(row)
        except CostModelError as failure:
            error = str(failure)
    return Step(row, cal.is_fitted(row["id"]), cal.generation(row["gpu"]), published, how,
                predicted, error)  # fmt: skip


def steps() -> tuple[list[Step], dict[str, Any]]:
    """Every row's Step, and the fits behind the predictors (``predictors``)."""
    predict, fits = predictors()
    return [step(row, predict) for row in _published().rows()], fits


def _percent(x: float | None, signed: bool = False) -> str:
    if x is None:
        return ""
    return f"{x:+.1%}" if signed else f"{x:.1%}"


def _util(s: Step, seconds: float | None) -> str:
    if seconds is None or not s.published:
        return ""
    got = utilization(s.row, s.published, seconds)
    return "" if got is None else f"{got[0]} {got[1]:.1%}"


def step_table(found: list[Step], memory_verdicts: dict[str, str]) -> list[list[str]]:
    names = list(found[0].predicted) if found else []
    header = ["id", "generation", "split", "memory", "published s", "how", "published util"]
    for name in names:
        header += [f"{name} s", f"{name} error", f"{name} util"]
    out = [header]
    for s in found:
        line = [s.id, s.generation, "fitted" if s.fitted else "held out",
                memory_verdicts.get(s.id, ""), f"{s.published:.3g}" if s.published else "",
                s.how, _util(s, s.published)]  # fmt: skip
        for name in names:
            seconds = s.predicted[name]
            line += [f"{seconds:.3g}" if seconds else "not evaluable",
                     _percent(s.relative_error(name), signed=True), _util(s, seconds)]  # fmt: skip
        out.append(line)
    return out


def _stats_line(found: list[Step], name: str, label: str) -> str:
    errors = [e for s in found if (e := s.relative_error(name)) is not None]
    stats = error_stats(errors)
    if stats is None:
        return f"  {label}: no rows"
    return f"  {label} ({len(errors)} rows): median |error| {stats[0]:.1%}, p90 {stats[1]:.1%}"


#: Subsets of the held-out rows the summary gives separately (where a predictor fails first).
KINDS = {
    "  held out, BF16 dense": lambda row: row["fp8"] == "none" and not row["num_experts"],
    "  held out, FP8": lambda row: row["fp8"] != "none",
    "  held out, MoE": lambda row: bool(row["num_experts"]),
}


def _worst(found: list[Step], name: str, count: int = 5) -> str:
    held = [(abs(e), e, s.id) for s in found if not s.fitted and (e := s.relative_error(name))]
    worst = sorted(held, reverse=True)[:count]
    return "  worst held out: " + ", ".join(f"{i} {e:+.0%}" for _, e, i in worst)


def calculon_lines(found: list[Step]) -> list[str]:
    """Korthikanti et al.'s Table 5 rows: |error| of each predictor beside Calculon's."""
    by_id = {s.id: s for s in found}
    names = list(found[0].predicted) if found else []
    lines = ["Korthikanti et al. Table 5 vs the Calculon simulator's validation (caa4b11):"]
    sums = dict.fromkeys(names, 0.0)
    for row_id, (seconds, delta) in CALCULON.items():
        s = by_id[row_id]
        ours = []
        for name in names:
            error = s.relative_error(name)
            sums[name] += abs(error) if error is not None else float("nan")
            ours.append(f"{name} {_percent(abs(error)) if error is not None else 'n/a'}")
        lines.append(f"  {row_id}: published {s.published:g} s, Calculon {seconds:g} s "
                     f"(|error| {abs(delta):.2%}); " + ", ".join(ours))  # fmt: skip
    means = ", ".join(f"{name} {sums[name] / len(CALCULON):.2%}" for name in names)
    lines.append(f"  mean |error|: Calculon {CALCULON_MEAN:.2%} (as printed); {means}")
    return lines


def step_summary(found: list[Step], fits: dict[str, Any]) -> list[str]:
    cal = _calibrate()
    lines = [
        f"Split (calibrate.is_fitted: sha256 of '{cal.SPLIT_SALT}:<id>', first byte even = "
        f"fitted): {sum(s.fitted for s in found)} fitted rows, "
        f"{sum(not s.fitted for s in found)} held out"
    ]
    for name in found[0].predicted if found else ():
        lines.append(f"{name}:")
        lines.append(_stats_line([s for s in found if s.fitted], name, "fitted rows"))
        held_out = [s for s in found if not s.fitted]
        lines.append(_stats_line(held_out, name, "held-out rows"))
        for label, keep in KINDS.items():
            lines.append(_stats_line([s for s in held_out if keep(s.row)], name, label))
        lines.append(_worst(found, name))
    lines += cal.describe(fits["baseline"], "baseline efficiency per generation (fitted rows):")
    if not cal.model_available():
        lines.append("model: costmodel.evaluate.simulate.step_time is not there yet; only the baseline "
                     "is printed")  # fmt: skip
    return lines + calculon_lines(found)


def _memory_words(v: Verdict) -> str:
    if v.error:
        return "not evaluable (explained)" if v.explained else "not evaluable"
    if v.fits:
        return "fits"
    return "fits as explained" if v.fits_explained else "does not fit"


def main(argv: list[str] | None = None, record: bool = False) -> int:
    """Print both tables and summaries; ``record``: and record the figures (recorded.py)."""
    argv = sys.argv[1:] if argv is None else argv
    found = verdicts()
    rows = table(found)
    if "--csv" in argv:
        csv.writer(sys.stdout, lineterminator="\n").writerows(rows)
        return 0
    if "--steps-csv" in argv:
        words = {v.id: _memory_words(v) for v in found}
        csv.writer(sys.stdout, lineterminator="\n").writerows(step_table(steps()[0], words))
        return 0
    print(
        "Memory verdicts on benchmarks/published_runs.csv (costmodel.evaluate.simulate.run.memory)"
    )
    for row in rows:
        print(" | ".join(row))
    print()
    for line in summary(found):
        print(line)
    print()
    found_steps, fits = steps()
    words = {v.id: _memory_words(v) for v in found}
    print("Step times on benchmarks/published_runs.csv (error = predicted / published - 1; "
          "util under the row's own FLOP convention)")  # fmt: skip
    for row in step_table(found_steps, words):
        print(" | ".join(row))
    print()
    for line in step_summary(found_steps, fits):
        print(line)
    if record:
        __import__("bench_headlines").record("published_runs", found, found_steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(record=True))
