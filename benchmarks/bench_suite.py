"""Benchmarks of the notebook suite and the handouts (figures for the closing note).

1. Each notebook executed top to bottom (nbclient, fresh kernel each, one at a time).
2. The whole suite executed with one worker per core (as `make notebooks` does).
3. `costmodel handouts` for the course: wall time, and the size of each page.
4. `costmodel params` from a cold process.
Nothing in notebooks/ is written: executions run on in-memory copies, handouts go to a temp dir.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jupytext

from costmodel.publish import handouts, suite


def execute_one(source: Path) -> float:
    nb = jupytext.read(source)
    start = time.perf_counter()
    suite.execute(nb)
    return time.perf_counter() - start


def main() -> list:
    """Print the figures; returns those recorded (``figures``)."""
    sources = suite.sources()
    suite.inline_figures()
    times = {p.stem: execute_one(p) for p in sources}
    for stem, seconds in times.items():
        print(f"  {stem:<26} {seconds:5.2f} s (target < 10 s)")
    print(
        f"notebooks one at a time: total {sum(times.values()):.1f} s, "
        f"slowest {max(times.values()):.2f} s"
    )

    jobs = os.cpu_count() or 1
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(execute_one, sources))
    suite_s = time.perf_counter() - start
    print(f"whole suite, {jobs} workers: {suite_s:.1f} s (target < 60 s)")

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        sections, folder = handouts.build(out=Path(tmp) / "course", progress=False)
        elapsed = time.perf_counter() - start
        sizes = {p.name: p.stat().st_size for p in folder.glob("*.html")}
        failed = [s.stem for s in sections if s.error]
    print(
        f"costmodel handouts (course, {jobs} jobs): {elapsed:.1f} s (target <= 60 s); "
        f"failed: {failed or 'none'}"
    )
    print(
        f"page sizes: largest {max(sizes.values()) / 1000:.0f} KB "
        f"({max(sizes, key=sizes.get)}), smallest {min(sizes.values()) / 1000:.0f} KB "
        f"(target <= 400 KB each)"
    )

    cold = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "costmodel", "params", "qwen3.6-35b-a3b"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        cold.append(time.perf_counter() - start)
    print(
        f"costmodel params, cold process: best {min(cold):.3f} s, median "
        f"{statistics.median(cold):.3f} s (target <= 1 s)"
    )
    return figures(times, suite_s, jobs, elapsed, sizes, cold)


def figures(times: dict, suite_s: float, jobs: int, handouts_s: float, sizes: dict,
            cold: list[float]) -> list:  # fmt: skip
    """The recorded figures (benchmarks/results/bench_suite.json, docs/benchmarks.md)."""
    import recorded as rec

    slowest = max(times, key=times.get)
    return [rec.figure("slowest notebook", times[slowest], "s", 2, f"{slowest}, executed top "
                       "to bottom in a fresh kernel", at_most=10.0),
            rec.figure(f"whole suite, {jobs} workers", suite_s, "s", 1, "every notebook "
                       "executed, one worker per core", at_most=60.0),
            rec.figure("handouts (course)", handouts_s, "s", 1, "costmodel handouts, the "
                       "teacher's edition, in-process", at_most=60.0),
            rec.figure("largest page", max(sizes.values()) / 1000, "KB", 0,
                       "of the course's handouts", at_most=400.0),
            rec.figure("costmodel params, cold process: median wall", statistics.median(cold),
                       "s", 3, f"{len(cold)} runs", at_most=1.0)]  # fmt: skip


if __name__ == "__main__":
    __import__("recorded").record("bench_suite", main())
