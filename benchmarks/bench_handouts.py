"""Where the handouts' build time goes (issue 12's target: the course handouts, both editions
and the PDF, in at most 20 s on a 2-core machine).

1. End to end: `costmodel handouts --edition both --pdf` for the course, as a reader runs it
   (a new process each time), wall time of each of RUNS builds and the CPU time the machine
   spent meanwhile (all processes: the build, its workers, kernels and Chromium).
2. One build in this process with `build(timings=...)`: the phases of the build (start, the
   notebooks, the pages, the booklets) and, per notebook, what its worker spent getting the
   kernel ready, running the notebook and exporting its two pages.
3. The parts a kernel costs, measured alone: starting one and getting its first reply, and the
   notebooks' imports in it (what one kernel per notebook would pay ten times; the build pays
   it once per worker).

Page sizes and booklet page counts are printed too. Nothing in notebooks/ is written.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from costmodel.publish import handouts, runner, suite

RUNS = 3


def _busy_seconds() -> float | None:
    """CPU seconds the machine has spent busy since boot (Linux /proc/stat), or None."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _kernel_times() -> tuple[float, float]:
    """(seconds to start a kernel and get its first reply, seconds for the notebooks' imports
    in it)."""
    from jupyter_client.manager import start_new_kernel

    start = time.perf_counter()
    km, kc = start_new_kernel(kernel_name="python3", extra_arguments=suite.KERNEL_ARGS)
    kc.execute_interactive("1", timeout=60, output_hook=lambda msg: None)
    started = time.perf_counter() - start
    start = time.perf_counter()
    kc.execute_interactive(runner.SETUP, timeout=120, output_hook=lambda msg: None)
    imported = time.perf_counter() - start
    kc.stop_channels()
    km.shutdown_kernel(now=True)
    return started, imported


def _builds(cores: int) -> tuple[list[float], list[float], dict, dict]:
    """RUNS builds as a reader runs them: their wall seconds, the machine's busy CPU seconds
    meanwhile, and the last build's page sizes and booklets (pages, bytes)."""
    walls, busy = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for attempt in range(RUNS):
            out = Path(tmp) / f"course-{attempt}"
            before, start = _busy_seconds(), time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "costmodel", "handouts", "--edition", "both", "--pdf"]
                + ["--out", str(out)],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            walls.append(time.perf_counter() - start)
            after = _busy_seconds()
            if before is not None and after is not None:
                busy.append(after - before)
        pages = sorted(out.glob("*.html")) + sorted((out / "student").glob("*.html"))
        sizes = {str(p.relative_to(out)): p.stat().st_size for p in pages}
        from pypdf import PdfReader

        pdf_pages = {
            str(pdf.relative_to(out)): (len(PdfReader(pdf).pages), pdf.stat().st_size)
            for pdf in (out / "booklet.pdf", out / "student" / "booklet.pdf")
        }
    return walls, busy, sizes, pdf_pages


def figures(walls: list[float], sizes: dict[str, int], cores: int) -> list:
    """The recorded figures (benchmarks/results/bench_handouts.json, docs/benchmarks.md)."""
    import recorded as rec

    return [rec.figure("handouts --edition both --pdf (course): median wall",
                       statistics.median(walls), "s", 1, f"{len(walls)} builds in a new process "
                       f"each, {cores} cores", at_most=20.0),
            rec.figure("handouts: largest page", max(sizes.values()) / 1000, "KB", 0,
                       f"of the {len(sizes)} HTML pages of both editions", at_most=400.0)]  # fmt: skip


def main() -> list:
    """Print the figures; returns those recorded (``figures``)."""
    suite.inline_figures()
    runner.skip_iri_format_checks()
    cores = os.cpu_count() or 1
    walls, busy, sizes, pdf_pages = _builds(cores)
    print(
        f"costmodel handouts --edition both --pdf (course, {cores} cores), {RUNS} builds: "
        f"best {min(walls):.1f} s, median {statistics.median(walls):.1f} s, "
        f"worst {max(walls):.1f} s (target <= 20 s)"
    )
    if busy:
        print(
            "  machine busy meanwhile: "
            + ", ".join(f"{b:.1f}" for b in busy)
            + f" CPU-seconds (of {cores} x wall)"
        )
    largest = max(sizes, key=sizes.get)
    print(
        f"pages: {len(sizes)}, largest {sizes[largest] / 1000:.0f} KB ({largest}), smallest "
        f"{min(sizes.values()) / 1000:.0f} KB, total {sum(sizes.values()) / 1e6:.2f} MB "
        f"(target <= 400 KB a page)"
    )
    for name, (count, size) in pdf_pages.items():
        print(f"{name}: {count} A4 pages, {size / 1e6:.1f} MB")

    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sections, _ = handouts.build(
            out=Path(tmp) / "course",
            edition="both",
            pdf=True,
            progress=False,
            timings=timings,
        )
    print(f"one build, phases (wall): total {timings['total']:.1f} s")
    notes = {
        "start": "scenario and folder checked while the workers start kernels and import",
        "notebooks": f"run and exported on {min(cores, len(sections))} workers",
        "pages": "pages moved, index and conventions written",
        "booklets": "both editions printed by one headless Chromium",
    }
    for name, note in notes.items():
        print(f"  {name:<10} {timings[name]:5.1f} s  {note}")
    parts = {
        key: sum(s.seconds.get(key, 0.0) for s in sections)
        for key in ("kernel", "execute", "export")
    }
    print(
        "  per worker, summed over the notebooks: "
        f"kernel reset {parts['kernel']:.1f} s, execution {parts['execute']:.1f} s, "
        f"export {parts['export']:.1f} s"
    )
    for s in sections:
        print(
            f"    {s.stem:<24} kernel {s.seconds.get('kernel', 0):4.2f}  "
            f"execute {s.seconds.get('execute', 0):4.2f}  export {s.seconds.get('export', 0):4.2f}"
        )

    started, imported = zip(*(_kernel_times() for _ in range(3)))
    start_s, import_s = min(started), min(imported)
    n = len(sections)
    print(
        f"a kernel alone: start {start_s:.2f} s, the notebooks' imports {import_s:.2f} s; "
        f"{n} fresh kernels would pay {n * (start_s + import_s):.1f} s, the build's "
        f"{min(cores, n)} workers pay {min(cores, n) * (start_s + import_s):.1f} s"
    )
    return figures(walls, sizes, cores)


if __name__ == "__main__":
    __import__("recorded").record("bench_handouts", main())
