"""Benchmark of `costmodel sweep` (figures for the closing note; not a test).

10,000 points (100 step times x 100 GPU counts on the course's scenario), target <= 1 s:
1. in-process: the grid evaluated (`evaluate_grid`: the first call timed apart, then the
   median of the others), and the CSV text;
2. the whole command from a cold process, CSV to a file (and once more with a PNG plot):
   wall time and the CPU time of the process, best and median of several runs.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from costmodel.evaluate import sweep
from costmodel.inputs.scenario import resolve
from costmodel.present.sweep import csv_text

VARY = ["step_time=10:208:100", "num_gpus=8:800:100"]
TARGET_S = 1.0


def in_process(runs: int = 7) -> dict[str, float]:
    scenario = resolve()
    axes = [sweep.parse_axis(text) for text in VARY]
    start = time.perf_counter()
    grid = sweep.evaluate_grid(scenario, axes)  # the first call
    first = time.perf_counter() - start
    times, texts = [], []
    for _ in range(runs):
        start = time.perf_counter()
        grid = sweep.evaluate_grid(scenario, axes)
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


def _line(label: str, walls: list[float], cpus: list[float]) -> str:
    return (
        f"{label}: wall best {min(walls):.3f} s, median {statistics.median(walls):.3f} s; CPU "
        f"median {statistics.median(cpus):.3f} s over {len(walls)} runs (target <= {TARGET_S} s)"
    )


if __name__ == "__main__":
    got = in_process()
    print(
        f"costmodel sweep, 10,000 points in-process: evaluation {got['evaluate_s'] * 1e3:.1f} ms "
        f"(median; the first call {got['first_s'] * 1e3:.0f} ms), CSV text "
        f"{got['csv_s'] * 1e3:.0f} ms (target <= {TARGET_S} s)"
    )
    print(_line("costmodel sweep, 10,000 points, cold process, CSV to a file", *cold([])))
    print(_line("  the same with --plot grid.png", *cold(["--plot", "grid.png"], runs=3)))
