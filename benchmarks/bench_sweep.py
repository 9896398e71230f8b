"""Benchmark of `costmodel sweep` (figures for the closing note; not a test).

10,000 points each:
1. the closed forms' keys (100 step times x 100 GPU counts on the course's scenario), target
   <= 1 s: in-process, the grid evaluated (the first call timed apart, then the median of the
   others) with the models' columns (100 distinct GPU counts: the step time is no key of the
   models) and with --closed-forms, and the CSV text; then the whole command from a cold
   process, CSV to a file (and once more with a PNG plot): wall time and the CPU time of the
   process, best and median of several runs;
2. a layout grid (TP x PP x CP x micro batch of Llama 3.1 70B on 512 H100) and two shape
   grids (hidden_size x num_layers of the course, and of Llama 3.1 70B), target <= 2 s: each
   point resolved by the one what-if path (evaluate.sweep.sweep_points), the points that
   differ only in numbers evaluated at once by the step-time and memory models on lanes
   (evaluate.sweep.sweep_lanes), once in-process; the time per point, how many times the
   models ran, and where the time goes (the what-if path, grouping and stacking, the
   prediction, the memory).
"""

from __future__ import annotations

import cProfile
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from costmodel.evaluate.sweep import sweep, sweep_points
from costmodel.inputs.scenario import resolve
from costmodel.present.sweep import csv_text

ROOT = Path(__file__).resolve().parents[1]
VARY = ["step_time=10:208:100", "num_gpus=8:800:100"]
LAYOUT = (
    ROOT / "scenarios" / "llama-3.1-70b-512xH100.yaml",
    ["tensor_parallel=1:10:10", "pipeline_parallel=1:10:10", "context_parallel=1,2,4,8,16"]
    + ["micro_batch=1:20:20"],
)
SHAPE = (None, ["hidden_size=1024:8192:100", "num_layers=1:100:100"])
SHAPE_LLAMA = (
    ROOT / "scenarios" / "llama-3.1-70b-512xH100.yaml",
    ["hidden_size=4096:16384:100", "num_layers=40:139:100"],
)
TARGET_S = 1.0
MODEL_TARGET_S = 2.0
#: Where a model grid's time goes: the functions timed (cumulative, from a profile).
PARTS = {
    "the what-if path (each point resolved, its shape built)": ("inputs/what_if.py", ("changed",)),
    "grouping and stacking the points": (
        "evaluate/sweep/sweep_lanes.py",
        ("quick_key", "key", "stack"),
    ),
    "prediction": ("evaluate/simulate/step_time.py", ("predict",)),
    "memory": ("evaluate/simulate/run.py", ("memory",)),
}


def in_process(runs: int = 7, model: bool = True) -> dict[str, float]:
    scenario = resolve()
    axes = [sweep.parse_axis(text) for text in VARY]
    start = time.perf_counter()
    grid = sweep.evaluate_grid(scenario, axes, model)  # the first call
    first = time.perf_counter() - start
    times, texts = [], []
    for _ in range(runs):
        start = time.perf_counter()
        grid = sweep.evaluate_grid(scenario, axes, model)
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        csv_text(grid, scenario["name"], sweep.conventions(scenario))
        texts.append(time.perf_counter() - start)
    assert len(grid) == 10_000
    return {
        "first_s": first,
        "evaluate_s": statistics.median(times),
        "csv_s": statistics.median(texts),
    }


def cold(extra: list[str], runs: int = 5) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds (user + system of the child) of the command, cold process."""
    walls, cpus = [], []
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            args = [a for text in VARY for a in ("--vary", text)]
            out = os.path.join(folder, "grid.csv")
            subprocess.run(
                [sys.executable, "-m", "costmodel", "sweep", *args, "--out", out, *extra],
                check=True,
                stdout=subprocess.DEVNULL,
                cwd=folder,
            )
            walls.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def model_grid(file, vary: list[str], runs: int = 3) -> tuple[str, float]:
    """One model grid of 10,000 points, in-process: its time (the median of `runs`), per point,
    how many times the models ran (on lanes, for many points at once, or for one), and where
    the time goes (the line printed), and its CPU seconds."""
    scenario = resolve(file)
    axes = [sweep.parse_axis(text) for text in vary]
    sweep.evaluate_grid(scenario, [axes[0]])  # the imports and the first scenario's caches
    ran = {"lanes": 0, "lanes_points": 0, "one": 0}
    real = sweep_points._model_figures

    def counted(sc, shape):
        size = max(np.size(value) for value in sc.values.values() if not isinstance(value, str))
        ran["lanes" if size > 1 else "one"] += 1
        ran["lanes_points"] += size if size > 1 else 0
        return real(sc, shape)

    sweep_points._model_figures = counted
    try:
        grid = sweep.evaluate_grid(scenario, axes)
    finally:
        sweep_points._model_figures = real
    walls, cpus = [], []
    for _ in range(runs):  # the median of a few (a busy machine's one run can be 10% off)
        start, cpu = time.perf_counter(), time.process_time()
        grid = sweep.evaluate_grid(scenario, axes)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    assert len(grid) == 10_000
    # where the time goes: a profile of a tenth of the grid (the last key's first tenth)
    tenth = sweep.Axis(axes[-1].key, axes[-1].points[: max(1, len(axes[-1].points) // 10)])
    profile = cProfile.Profile()
    profile.enable()
    sweep.evaluate_grid(scenario, [*axes[:-1], tenth])
    profile.disable()
    stats = pstats.Stats(profile).stats
    total = sum(row[2] for row in stats.values())  # the profile's own seconds (slower)
    share = {
        label: sum(
            row[3] for key, row in stats.items() if key[0].endswith(where) and key[2] in names
        )
        / total
        for label, (where, names) in PARTS.items()
    }
    kept = int((grid.refused == "").sum())
    parts = ", ".join(f"{label} {value:.0%}" for label, value in share.items())
    line = (
        f"{wall:.2f} s wall, {cpu:.2f} s CPU (medians of {runs}; CPU {min(cpus):.2f} to "
        f"{max(cpus):.2f} s) for 10,000 points ({kept:,} kept, {10_000 - kept:,} "
        f"refused; target <= {MODEL_TARGET_S} s: {cpu / MODEL_TARGET_S:.2f}x in CPU time), "
        f"{cpu / 10_000 * 1e3:.3f} ms a point; the models ran {ran['lanes']} times on lanes "
        f"({ran['lanes_points']:,} points) and {ran['one']} times for one point; of the time "
        f"(a tenth profiled): {parts}"
    )
    return line, cpu


def _line(label: str, walls: list[float], cpus: list[float]) -> str:
    return (
        f"{label}: wall best {min(walls):.3f} s, median {statistics.median(walls):.3f} s; CPU "
        f"median {statistics.median(cpus):.3f} s over {len(walls)} runs (target <= {TARGET_S} s)"
    )


def figures(closed: dict, cold_runs: dict, grids: dict) -> list:
    """The recorded figures (benchmarks/results/bench_sweep.json, docs/benchmarks.md)."""
    import recorded as rec

    out = [rec.figure(f"10,000 points in-process, {label}: evaluation + CSV",
                      (got["evaluate_s"] + got["csv_s"]) * 1e3, "ms", 1,
                      "the closed forms' keys (100 step times x 100 GPU counts), medians of 7",
                      at_most=TARGET_S * 1e3) for label, got in closed.items()]  # fmt: skip
    out += [rec.figure(f"10,000 points, cold process, {label}: median wall",
                       statistics.median(walls), "s", 3, f"the whole command, CSV to a file "
                       f"({len(walls)} runs; CPU median {statistics.median(cpus):.3f} s)",
                       at_most=TARGET_S) for label, (walls, cpus) in cold_runs.items()]  # fmt: skip
    out += [rec.figure(f"{label}: CPU", cpu, "s", 2, "10,000 points resolved and evaluated by "
                       "the step-time and memory models, in-process (median of 3 runs)",
                       at_most=MODEL_TARGET_S) for label, cpu in grids.items()]  # fmt: skip
    return out


if __name__ == "__main__":
    closed = {}
    for model, label in ((True, "with the models' columns"), (False, "--closed-forms")):
        got = closed[label] = in_process(model=model)
        print(
            f"costmodel sweep, 10,000 points of the closed forms' keys in-process, {label}: "
            f"evaluation {got['evaluate_s'] * 1e3:.1f} ms (median; the first call "
            f"{got['first_s'] * 1e3:.0f} ms), CSV text {got['csv_s'] * 1e3:.0f} ms (target <= "
            f"{TARGET_S} s)"
        )
    cold_runs = {"CSV": cold([]), "--closed-forms": cold(["--closed-forms"])}
    print(_line("costmodel sweep, 10,000 points, cold process, CSV to a file", *cold_runs["CSV"]))
    print(_line("  the same with --closed-forms", *cold_runs["--closed-forms"]))
    cold_runs["--plot"] = cold(["--plot", "grid.png"], runs=3)
    print(_line("  the same with --plot grid.png", *cold_runs["--plot"]))
    grids = {}
    print("costmodel sweep, a layout grid (Llama 3.1 70B, TP x PP x CP x micro batch):")
    line, grids["layout grid (Llama 3.1 70B, TP x PP x CP x micro batch)"] = model_grid(*LAYOUT)
    print("  " + line)
    print("costmodel sweep, a shape grid (the course, hidden_size x num_layers):")
    line, grids["shape grid (the course, hidden_size x num_layers)"] = model_grid(*SHAPE)
    print("  " + line)
    print("costmodel sweep, a shape grid (Llama 3.1 70B, hidden_size x num_layers):")
    line, grids["shape grid (Llama 3.1 70B, hidden_size x num_layers)"] = model_grid(*SHAPE_LLAMA)
    print("  " + line)
    import recorded

    recorded.record("bench_sweep", figures(closed, cold_runs, grids))
