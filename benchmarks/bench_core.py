"""Benchmarks of the core (figures for the closing note; not a test).

1. `costmodel report` from a cold process: wall time, best and median of several runs; and its
   CPU time (user + sys of the child process) over a bare `python -c pass`'s, medians, against
   the target of at most 4x (issue 21: 48x before the numeric forms were generated).
2. One closed form (MFU) over 1e6 configurations through lambdify + NumPy, and the ratio
   against evaluating the same expression with `subs` in a Python loop (timed on a sample and
   scaled to 1e6).
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time

import numpy as np
import sympy as sp

from costmodel.derive.symbols import D, N, P, T, n_gpu
from costmodel.derive.utilization import mfu


def cold_report(runs: int = 7) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "costmodel", "report"], check=True, stdout=subprocess.DEVNULL
        )
        times.append(time.perf_counter() - start)
    return times


#: Cold `costmodel report` CPU time over a bare Python start's: at most this (issue 21).
CPU_RATIO_TARGET = 4.0


def cpu_seconds(command: list[str], runs: int = 9) -> float:
    """Median CPU time (user + sys) of `command` in a fresh child process."""
    times = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times)


def cold_cpu_ratio(runs: int = 9) -> dict[str, float]:
    """Cold `costmodel report` CPU time over `python -c pass`'s (medians of `runs`)."""
    bare = cpu_seconds([sys.executable, "-c", "pass"], runs)
    report = cpu_seconds([sys.executable, "-m", "costmodel", "report"], runs)
    return {"report_s": report, "bare_s": bare, "ratio": report / bare}


def closed_form(size: int = 1_000_000, sample: int = 2_000) -> dict[str, float]:
    rng = np.random.default_rng(0)
    args = [
        rng.uniform(1e9, 1e11, size),
        rng.uniform(1e5, 1e7, size),
        rng.uniform(1, 500, size),
        rng.integers(1, 4096, size).astype(float),
        rng.uniform(1e14, 2e15, size),
    ]
    symbols = (N, D, T, n_gpu, P)
    start = time.perf_counter()
    fast = sp.lambdify(symbols, mfu, modules="numpy")
    lambdify_s = time.perf_counter() - start
    start = time.perf_counter()
    values = fast(*args)
    numpy_s = time.perf_counter() - start
    start = time.perf_counter()
    slow = [float(mfu.subs(dict(zip(symbols, (a[i] for a in args))))) for i in range(sample)]
    subs_s = (time.perf_counter() - start) * size / sample
    assert np.allclose(values[:sample], slow)
    return {
        "lambdify_s": lambdify_s,
        "numpy_s": numpy_s,
        "subs_loop_s_scaled": subs_s,
        "ratio": subs_s / numpy_s,
    }


if __name__ == "__main__":
    times = cold_report()
    print(
        f"costmodel report, cold process: best {min(times):.3f} s, "
        f"median {statistics.median(times):.3f} s over {len(times)} runs (target <= 1 s)"
    )
    cpu = cold_cpu_ratio()
    print(
        f"costmodel report, cold process, CPU (user + sys, median): {cpu['report_s']:.3f} s = "
        f"{cpu['ratio']:.1f}x a bare `python -c pass` ({cpu['bare_s'] * 1e3:.1f} ms) "
        f"(target <= {CPU_RATIO_TARGET:g}x; 48x before the numeric forms)"
    )
    result = closed_form()
    print(
        f"MFU over 1e6 configurations: lambdify {result['lambdify_s'] * 1e3:.1f} ms + "
        f"NumPy {result['numpy_s'] * 1e3:.1f} ms (target <= 500 ms); subs loop, scaled "
        f"from 2,000: {result['subs_loop_s_scaled']:.0f} s; ratio {result['ratio']:,.0f}x"
    )
