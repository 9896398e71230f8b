"""Benchmarks of the core (figures for the closing note; not a test).

1. `costmodel report` from a cold process: wall time, best and median of several runs; and the
   CPU time (user + sys of the child process) of cold `report`, `gemms` and `params` over a
   bare `python -c pass`'s, medians, against the target of at most 4x for the course's report
   (issue 21: 48x before the numeric forms were generated, 10x before the router table, the
   generated course scenario and the frozen dataclasses without exec, about 3.7x to 4.3x before
   the quick commands ended without the interpreter's teardown and imported dataclasses
   without inspect). Bytecode is cached, as in
   an installed package; the standard library a report needs (IMPORT_FLOOR) is measured too.
2. One closed form (MFU) over 1e6 configurations through lambdify + NumPy, and the ratio
   against evaluating the same expression with `subs` in a Python loop (timed on a sample and
   scaled to 1e6).
"""

from __future__ import annotations

import os
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


#: The cold commands measured, each against the same bare start.
COLD_COMMANDS = {
    "report (the course, MoE)": ["report"],
    "report (Llama 3.1 70B, dense)": [
        "report", "--scenario", "scenarios/llama-3.1-70b-512xH100.yaml",
    ],
    "gemms (the course)": ["gemms"],
    "params qwen3.6-35b-a3b": ["params", "qwen3.6-35b-a3b"],
}  # fmt: skip
#: The standard library a report of the course imports besides a bare start's: the floor under
#: the ratio (a scenario file adds PyYAML, a MoE combination missing from the router table NumPy).
#: dataclasses is imported as the quick commands import it, with a stand-in for inspect
#: (costmodel.cli._dataclasses_without_inspect).
IMPORT_FLOOR = (
    "import argparse, copy, fractions, json, signal, sys, threading, typing; "
    "sys.modules['inspect'] = type(sys)('inspect'); import dataclasses"
)


def _installed_env() -> dict[str, str]:
    """The environment of the children: bytecode written and read as in an installed package
    (pip compiles it at install time; PYTHONDONTWRITEBYTECODE, if set here, would make every cold
    run compile every module again)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def cpu_seconds(command: list[str], runs: int = 9) -> float:
    """Median CPU time (user + sys) of `command` in a fresh child process, after one run that
    writes the bytecode."""
    env = _installed_env()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    times = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times)


def cold_cpu_ratio(runs: int = 9) -> dict[str, float]:
    """Cold CPU time of each command of COLD_COMMANDS, and of IMPORT_FLOOR, over a bare
    `python -c pass`'s (medians of `runs`)."""
    bare = cpu_seconds([sys.executable, "-c", "pass"], runs)
    out = {"bare_s": bare}
    for name, args in COLD_COMMANDS.items():
        out[name] = cpu_seconds([sys.executable, "-m", "costmodel", *args], runs)
    out["import floor"] = cpu_seconds([sys.executable, "-c", IMPORT_FLOOR], runs)
    return out


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


def figures(times: list[float], cpu: dict[str, float], bare: float, result: dict) -> list:
    """The recorded figures (benchmarks/results/bench_core.json, docs/benchmarks.md)."""
    import recorded as rec

    out = [rec.figure("costmodel report, cold process: median wall", statistics.median(times),
                      "s", 3, f"the course's report in a new process, {len(times)} runs",
                      at_most=1.0)]  # fmt: skip
    for name, seconds in cpu.items():
        if name != "import floor":
            out.append(rec.figure(f"costmodel {name}, cold CPU over a bare start", seconds / bare,
                                  "x", 2, "user + sys CPU of a new process (median) over a bare "
                                  "`python -c pass`'s: the machine's load does not count",
                                  at_most=CPU_RATIO_TARGET if name == "report (the course, MoE)"
                                  else None))  # fmt: skip
    out.append(rec.figure("MFU over 1e6 configurations, lambdify + NumPy",
                          (result["lambdify_s"] + result["numpy_s"]) * 1e3, "ms", 1,
                          "one closed form (MFU) compiled by lambdify and evaluated on 1e6 "
                          "random configurations", at_most=500.0))  # fmt: skip
    return out


if __name__ == "__main__":
    times = cold_report()
    print(
        f"costmodel report, cold process: best {min(times):.3f} s, "
        f"median {statistics.median(times):.3f} s over {len(times)} runs (target <= 1 s)"
    )
    cpu = cold_cpu_ratio()
    bare = cpu.pop("bare_s")
    print(
        f"cold processes, CPU (user + sys, median), over a bare `python -c pass` "
        f"({bare * 1e3:.1f} ms); target for the course's report <= {CPU_RATIO_TARGET:g}x:"
    )
    for name, seconds in cpu.items():
        label = IMPORT_FLOOR if name == "import floor" else f"costmodel {name}"
        print(f"  {label}: {seconds * 1e3:.0f} ms = {seconds / bare:.1f}x")
    result = closed_form()
    print(
        f"MFU over 1e6 configurations: lambdify {result['lambdify_s'] * 1e3:.1f} ms + "
        f"NumPy {result['numpy_s'] * 1e3:.1f} ms (target <= 500 ms); subs loop, scaled "
        f"from 2,000: {result['subs_loop_s_scaled']:.0f} s; ratio {result['ratio']:,.0f}x"
    )
    import recorded

    recorded.record("bench_core", figures(times, cpu, bare, result))
