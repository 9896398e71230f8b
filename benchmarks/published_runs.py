"""Memory verdicts on the published runs of ``benchmarks/published_runs.csv``.

Every run in the table trained, so each must fit under the settings its row states. For each
row this prints the peak of the most loaded GPU (``costmodel.evaluate.run.memory``), the phase
that sets it, the usable capacity and the verdict; where the source prints the memory it
measured, the prediction beside it and their ratio. A row that does not fit, or that costmodel
cannot evaluate, must be named in ``EXPLAINED``: the convention that explains the difference and
the settings under which the row fits, which are evaluated too. The step-time issue (20) adds
its columns to the same table.

    python benchmarks/published_runs.py          # the table and a summary
    python benchmarks/published_runs.py --csv    # the same as CSV on stdout

``verdicts()`` is what tests/test_published_fit.py checks: the rows the issue names fit as
stated, every other row fits or is explained, and every explanation makes its row fit.
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from costmodel.errors import CostModelError
from costmodel.evaluate.run import memory
from costmodel.inputs import scenario

GIB = 2**30


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
        {"context_parallel": 2},
        "context parallelism: the release's configure.sh sets CP 2 for BF16 while the README's "
        "header prints none (the row records CP 1, the only value its printed GA 16 allows); "
        "with CP 2 the activations halve",
    ),
    "dgxc-2502-nemotron4-340b-fp8-128gpu": (
        {"context_parallel": 2},
        "context parallelism: CP 2 in the release's configure.sh, as for the BF16 row",
    ),
    "dgxc-2505-llama31-405b-bf16-512gpu": (
        {"memory_reserve": 2**30},
        "memory_reserve: the peak exceeds the usable bytes by less than the memory model sets "
        "aside for the CUDA context and NCCL buffers (course.yaml's memory_reserve, an "
        "assumption); with 1 GiB set aside it fits",
    ),
    "dgxc-2505-llama31-405b-fp8-512gpu": (
        {"memory_reserve": 2**30},
        "memory_reserve: as for the BF16 row",
    ),
    "megatron-bridge-2604-qwen3-235b-a22b-h100-fp8": (
        None,
        "MoE parallel folding: EP 32 spans TP x DP (Megatron-Core's expert tensor parallelism "
        "folds the attention's TP ranks into the experts' EP group); costmodel's layout keeps EP "
        "inside DP, so it cannot place this layout",
    ),
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
    return memory(scenario.resolve(overrides=keys).values, fit=False)


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
        if v.error:
            verdict_text = "not evaluable"
        else:
            verdict_text = "fits" if v.fits else "does not fit"
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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    found = verdicts()
    rows = table(found)
    if "--csv" in argv:
        csv.writer(sys.stdout, lineterminator="\n").writerows(rows)
        return 0
    print("Memory verdicts on benchmarks/published_runs.csv (costmodel.evaluate.run.memory)")
    for row in rows:
        print(" | ".join(row))
    print()
    for line in summary(found):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
