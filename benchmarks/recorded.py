"""The figures a benchmark records: each script of `make benchmark` writes its headline figures
to ``benchmarks/results/<script>.json`` (committed), with when and where they were measured, and
``docs/benchmarks.md`` is rendered from those files (``benchmarks/docs_page.py``). So no figure
of a benchmark is typed into a page: the page is generated and drift-tested, and a test checks
that no hand-written page repeats one of its figures.

A figure is a name, a value in the unit shown, how many decimals it is shown with, a target
where the project has one (at most or at least a value) and a short note of what was measured.
Where: the date (UTC), the CPU count, Python's version and the 1-minute load average when the
run ended (the machine may be shared: a timing read beside the load the run had). No host name
or path is recorded.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
#: How a results file begins: write_generated overwrites only a file that begins so.
HEADER = '{\n  "generated": "by benchmarks/'
#: Units written against the number (17.8%, 3.7x); any other unit after a space (7.6 s).
TIGHT_UNITS = ("%", "x")


def figure(name: str, value: float, unit: str, digits: int, note: str,
           at_most: float | None = None, at_least: float | None = None) -> dict[str, Any]:  # fmt: skip
    """One recorded figure (``value`` in ``unit``, shown with ``digits`` decimals)."""
    target = (
        {"at_most": at_most} if at_most is not None
        else {"at_least": at_least} if at_least is not None else None
    )  # fmt: skip
    return {"name": name, "value": float(value), "unit": unit, "digits": digits,
            "target": target, "note": note}  # fmt: skip


def _with_unit(number: str, unit: str) -> str:
    if not unit:
        return number
    return f"{number}{unit}" if unit in TIGHT_UNITS else f"{number} {unit}"


def shown(fig: dict[str, Any]) -> str:
    """The figure as the page prints it: '7.6 s', '17.8%', '3.7x', '259'."""
    return _with_unit(f"{fig['value']:.{fig['digits']}f}", fig["unit"])


def target_text(fig: dict[str, Any]) -> str:
    target = fig.get("target")
    if not target:
        return ""
    (kind, bound), = target.items()  # fmt: skip
    return ("<= " if kind == "at_most" else ">= ") + _with_unit(f"{bound:g}", fig["unit"])


def met(fig: dict[str, Any]) -> bool | None:
    """Whether the figure meets its target (None: no target); the value as shown is compared,
    so the page never says 'no' beside a value that reads as the bound."""
    target = fig.get("target")
    if not target:
        return None
    (kind, bound), = target.items()  # fmt: skip
    value = round(fig["value"], fig["digits"])
    return value <= bound if kind == "at_most" else value >= bound


def where() -> dict[str, Any]:
    """When and where a run was measured (no host name, no path)."""
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:  # not on this platform
        load = None
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_1min": load,
    }


def command(script: str) -> str:
    return f"python benchmarks/{script}.py"


def text(script: str, figures: list[dict[str, Any]], measured: dict[str, Any]) -> str:
    """A results file's text (its first key marks it generated: HEADER)."""
    data = {"generated": f"by benchmarks/{script}.py (`make benchmark`): do not edit",
            "script": script, "command": command(script), "measured": measured,
            "figures": figures}  # fmt: skip
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def path(script: str, folder: Path = RESULTS) -> Path:
    return folder / f"{script}.json"


def record(script: str, figures: list[dict[str, Any]], measured: dict[str, Any] | None = None,
           folder: Path = RESULTS, page: bool = True) -> None:  # fmt: skip
    """Write ``script``'s results file (atomically, keeping its mode) and render the page again
    (``page``); one line on stderr says what was written (stdout is the benchmark's own)."""
    from costmodel.generate import write_generated

    folder.mkdir(exist_ok=True)
    target = path(script, folder)
    write_generated(target, text(script, figures, measured or where()), HEADER,
                    "benchmark results file")  # fmt: skip
    written = [str(target.relative_to(REPO)) if target.is_relative_to(REPO) else str(target)]
    if page:
        if str(HERE) not in sys.path:
            sys.path.insert(0, str(HERE))
        import docs_page

        docs_page.write()
        written.append(str(docs_page.PAGE.relative_to(REPO)))
    print(f"recorded: {' and '.join(written)}", file=sys.stderr)


def load_all(folder: Path = RESULTS) -> dict[str, dict[str, Any]]:
    """script -> its results file's data, for every results file in ``folder``."""
    return {
        p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))
    }
