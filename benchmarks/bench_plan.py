"""Benchmark of `costmodel plan` (figures for the closing note; not a test).

1. Speed (target <= 2 s each): a 1,024-GPU search for Llama-3.1-70B dense
   (scenarios/llama-3.1-70b-512xH100.yaml) and for DeepSeek-V3
   (scenarios/deepseek-v3-2048xH800.yaml), in-process: the best and the median of a few runs,
   each a fresh search (nothing cached between runs).
2. `--published`: benchmarks/plan_published.py, where each published run's layout ranks.

    python benchmarks/bench_plan.py              # the speed figures
    python benchmarks/bench_plan.py --published  # and the published runs' ranks (minutes)
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from costmodel.evaluate.plan import plan
from costmodel.inputs.scenario import resolve

ROOT = Path(__file__).resolve().parents[1]
SEARCHES = (
    ("Llama-3.1-70B dense", ROOT / "scenarios" / "llama-3.1-70b-512xH100.yaml", 1024),
    ("DeepSeek-V3 MoE", ROOT / "scenarios" / "deepseek-v3-2048xH800.yaml", 1024),
)
TARGET_S = 2.0


def timed(path: Path, gpus: int, runs: int = 3) -> tuple[list[float], list[float], plan.Plan]:
    """Wall and CPU seconds of each run (the CPU time: the machine may be shared)."""
    sc = resolve(path)
    walls, cpus = [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        found = plan.search(sc, gpus)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return walls, cpus, found


def main(argv: list[str]) -> int:
    import recorded as rec

    figures = []
    for label, path, gpus in SEARCHES:
        times, cpus, found = timed(path, gpus)
        figures.append(rec.figure(f"plan, {label} on {gpus:,} GPUs: median wall",
                                  statistics.median(times), "s", 2,
                                  f"a fresh search in-process, {len(times)} runs (CPU median "
                                  f"{statistics.median(cpus):.2f} s); {found.searched:,} layouts "
                                  f"searched, own layout rank {found.own_rank}",
                                  at_most=TARGET_S))  # fmt: skip
        top = found.rows[0]
        print(
            f"costmodel plan, {label} on {gpus:,} x {found.base.gpu}: best {min(times):.2f} s, "
            f"median {statistics.median(times):.2f} s (CPU median {statistics.median(cpus):.2f} "
            f"s) over {len(times)} runs (target <= "
            f"{TARGET_S} s); {found.searched:,} layouts searched, {found.fitting:,} fit, "
            f"{found.timed:,} timed; own layout rank {found.own_rank} "
            f"({found.own.seconds:.2f} s), top {top.seconds:.2f} s"
        )
    rec.record("bench_plan", figures)
    if "--published" in argv:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import plan_published

        return plan_published.main([])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
