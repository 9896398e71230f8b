"""The notebook suite: the list of notebooks, and their deterministic execution.

`notebooks/NN_name.py` (jupytext percent format) are the sources; `python -m costmodel.publish.suite`
(`make notebooks`) regenerates each `NN_name.ipynb` from its source and executes it top to
bottom, with no timing metadata, so that a second run leaves git clean.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

#: The package, and the folder around it (the repository, in a source checkout).
PACKAGE = Path(__file__).resolve().parents[1]
ROOT = PACKAGE.parent


def _notebooks() -> Path:
    """The notebooks: `notebooks/` at the top of a checkout (where a reader opens them and an
    editable install reads them); in an installed package, the copy the wheel maps from it into
    costmodel/course/notebooks/ (setup.py, package data)."""
    checkout = ROOT / "notebooks"
    if (ROOT / "pyproject.toml").is_file() and checkout.is_dir():
        return checkout
    return PACKAGE / "course" / "notebooks"


NOTEBOOKS = _notebooks()
TIMEOUT_S = 120
#: Kernel arguments: keep the kernel's own start-up notices (not cell output) off stderr.
KERNEL_ARGS = ["--IPKernelApp.log_level=CRITICAL"]


def sources(names: list[str] | None = None) -> list[Path]:
    found = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
    if names:
        found = [p for p in found if any(p.stem.startswith(n) or p.name == n for n in names)]
    return found


def clean(nb) -> None:
    """Drop what changes from run to run; number the cells (jupytext makes random ids)."""
    for index, cell in enumerate(nb.cells, start=1):
        cell.id = f"cell-{index:02d}"
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                output.get("metadata", {}).pop("execution", None)
            cell.outputs = merged_streams(cell.get("outputs", []))


def merged_streams(outputs: list) -> list:
    """Consecutive stream outputs of one stream as one: how the kernel splits printed text into
    messages depends on timing (two prints may arrive as one message or two)."""
    merged: list = []
    for output in outputs:
        last = merged[-1] if merged else None
        if (
            output.get("output_type") == "stream"
            and last is not None
            and last.get("output_type") == "stream"
            and last.get("name") == output.get("name")
        ):
            last["text"] = last["text"] + output["text"]
        else:
            merged.append(output)
    return merged


def inline_figures() -> None:
    """Kernels inherit the environment: MPLBACKEND=Agg there would stop inline figures (and
    nbval would report missing outputs). Call once, before kernels start."""
    os.environ.pop("MPLBACKEND", None)


def execute(nb, cwd: Path = NOTEBOOKS):
    from costmodel.publish.markdown_cells import Client

    client = Client(
        nb,
        timeout=TIMEOUT_S,
        kernel_name="python3",
        record_timing=False,
        extra_arguments=KERNEL_ARGS,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    clean(nb)
    return nb


def build(source: Path) -> Path:
    import jupytext
    import nbformat

    nb = jupytext.read(source)
    execute(nb)
    target = source.with_suffix(".ipynb")
    tmp = target.with_suffix(".ipynb.tmp")
    nbformat.write(nb, tmp)
    tmp.replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate and execute the notebooks.")
    parser.add_argument("names", nargs="*", help="notebook prefixes (default: all)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    paths = sources(args.names)
    inline_figures()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for target in pool.map(build, paths):
            print(f"executed {target.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
