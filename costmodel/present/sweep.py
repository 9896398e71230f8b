"""A sweep's grid (evaluate.sweep) as CSV and as a plot, and the rule for the files they go to.

The CSV's first line is a comment that names the scenario and the conventions; then a header
row and one row per point: the varied keys, tokens_per_step, the figures (their paths in
`costmodel report --format json`; fractions, full precision) and `refused`. An empty figure is
undefined (no measured throughput, a dense model) or refused: `refused` then says why `costmodel
report` would refuse the point, and none of its figures is written.

A file is written atomically (a temporary file beside it, then a rename) and only where nothing
is, or over a file a sweep wrote: a CSV that starts with the comment line, a PNG or SVG that
carries `costmodel sweep` in its metadata. Anything else at the path (another file, a link, a
folder) is refused, never replaced.
"""

from __future__ import annotations

import csv
import io
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from costmodel.errors import CostModelError
from costmodel.evaluate.sweep import Grid
from costmodel.formats import input_value, printable, shown

MARKER = "costmodel sweep"
#: The first bytes of a CSV a sweep wrote.
CSV_START = f"# {MARKER}".encode()
#: Plot formats, by suffix.
PLOT_FORMATS = {".png": "png", ".svg": "svg"}
#: Lines of a plot at most: one per value of the second varied key (evenly chosen beyond).
MAX_LINES = 8
_SIGNATURE = {
    "png": lambda head: head.startswith(b"\x89PNG\r\n\x1a\n")
    and b"tEXtSoftware\x00" + MARKER.encode() in head,
    "svg": lambda head: f"<dc:title>{MARKER}</dc:title>".encode() in head,
    "csv": lambda head: head.startswith(CSV_START),
}


def _cell(values: np.ndarray) -> list[str]:
    """A column as CSV fields: integers as they are, floats in full (repr), NaN empty."""
    if values.dtype.kind == "i":
        return [str(v) for v in values.tolist()]
    return ["" if v != v else repr(v) for v in values.tolist()]


#: Rows turned into text at a time (a million-point grid is not held as strings all at once).
CHUNK_ROWS = 50_000


def csv_chunks(grid: Grid, name: str, conventions: str) -> Iterator[str]:
    """The grid as CSV text (see the module docstring), a few thousand rows at a time."""
    head = io.StringIO()
    head.write(f"# {MARKER}: {printable(name)}; {conventions}; empty: undefined, or refused\n")
    csv.writer(head, lineterminator="\n").writerow([*grid.columns, "refused"])
    yield head.getvalue()
    reasons = grid.refused.tolist()
    quoted = {reason: _text_field(reason) for reason in set(reasons)}  # a few distinct ones
    for start in range(0, len(grid), CHUNK_ROWS):
        part = slice(start, start + CHUNK_ROWS)
        fields = [_cell(values[part]) for values in grid.columns.values()]
        fields.append([quoted[reason] for reason in reasons[part]])
        # numbers need no quoting: joined, not through csv.writer (5 times faster)
        yield "".join(",".join(line) + "\n" for line in zip(*fields))


def csv_text(grid: Grid, name: str, conventions: str) -> str:
    """The whole CSV as one text."""
    return "".join(csv_chunks(grid, name, conventions))


def _text_field(text: str) -> str:
    """A text as a CSV field (quoted where it has to be; an empty one empty)."""
    if not text:
        return ""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow([text])
    return buffer.getvalue()


def _lines(count: int) -> list[int]:
    """Which values of the second key get a line: all, or MAX_LINES evenly chosen."""
    if count <= MAX_LINES:
        return list(range(count))
    return sorted(set(np.linspace(0, count - 1, MAX_LINES).round().astype(int).tolist()))


def _lines_of(values: np.ndarray) -> np.ndarray:
    """(first key, second key) from the grid's N-d array: the first key along the rows, the
    second (if any) across the columns, the others at their first point."""
    if values.ndim == 1:
        return values[:, None]
    return values[(slice(None), slice(None)) + (0,) * (values.ndim - 2)]


def plot_bytes(grid: Grid, kind: str) -> bytes:
    """MFU (and HFU, dashed, where recompute makes it differ) in percent against the first
    varied key; one line per value of the second (MAX_LINES at most); the other keys at their
    first point. Refused points are gaps."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    axes = grid.axes
    shape = tuple(len(axis.points) for axis in axes)
    mfu, hfu = (_lines_of(grid.columns[key].reshape(shape)) for key in ("mfu", "hfu"))
    x = axes[0].points
    figure = Figure(figsize=(7, 4.5))
    ax = figure.add_subplot()
    with_hfu = not np.allclose(mfu, hfu, equal_nan=True)
    rows = _lines(mfu.shape[1])
    for number, j in enumerate(rows):
        colour = f"C{number % 10}"
        label = (
            f"{axes[1].key} = {input_value(axes[1].points[j].item())}" if len(axes) > 1 else None
        )
        marker = "o" if len(x) <= 20 else None
        ax.plot(x, 100 * mfu[:, j], color=colour, marker=marker, label=label)
        if with_hfu:
            ax.plot(x, 100 * hfu[:, j], color=colour, marker=marker, linestyle="--")
    ax.set_xlabel(axes[0].key)
    ax.set_ylabel("MFU, % of peak_flops" + (" (HFU dashed)" if with_hfu else ""))
    if x[0] > 0 and x[-1] / x[0] >= 100:
        ax.set_xscale("log")
    fixed = [f"{a.key} = {input_value(a.points[0].item())}" for a in axes[2:]]
    title = f"costmodel sweep: MFU against {axes[0].key}"
    if len(axes) > 1 and len(rows) < len(axes[1].points):
        title += f"\n{len(rows)} of {len(axes[1].points)} values of {axes[1].key}"
    if fixed:
        title += "\n" + ", ".join(fixed)
    shown_points = mfu[:, rows]
    if np.isnan(shown_points).all():
        title += (
            "\nno point drawn: costmodel report refuses each (the CSV's column refused says why)"
        )
    elif np.isnan(shown_points).any():
        title += "\ngaps: points costmodel report refuses (the CSV's column refused says why)"
    if x[0] < x[-1]:
        ax.set_xlim(x[0], x[-1])
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    if len(axes) > 1:
        ax.legend(fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    metadata = {"Software": MARKER} if kind == "png" else {"Creator": MARKER, "Date": None}
    figure.savefig(buffer, format=kind, metadata=metadata)
    return buffer.getvalue()


def plot_kind(path: str) -> str:
    """png or svg, by the suffix of --plot's FILE."""
    kind = PLOT_FORMATS.get(Path(path).suffix.lower())
    if kind is None:
        raise CostModelError(f"--plot: {shown(path)} is not allowed; expected a .png or .svg file")
    return kind


def check_target(path: str, kind: str, option: str) -> Path:
    """Refuse a path a sweep may not write: its folder missing, or something there that a
    sweep did not write (see the module docstring)."""
    target = Path(path)
    if not target.name or not target.parent.is_dir():
        raise CostModelError(
            f"{option}: {shown(path)} is not allowed; expected a file in an existing folder"
        )
    try:
        status = os.lstat(target)
    except FileNotFoundError:
        return target
    except OSError as error:
        raise CostModelError(
            f"{option}: {shown(path)} is not allowed; expected a path that can be read "
            f"({error.strerror})"
        ) from None
    ours = False
    if stat.S_ISREG(status.st_mode):
        with open(target, "rb") as handle:
            ours = _SIGNATURE[kind](handle.read(4096))
    if not ours:
        raise CostModelError(
            f"{option}: {shown(path)} is not allowed; expected a new file or a {kind.upper()} "
            "a sweep wrote (it is there and costmodel sweep did not write it)"
        )
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomically(target: Path, data: Iterable[bytes]) -> None:
    """`data` (its pieces in order) to a temporary file beside `target`, then a rename over it."""
    handle, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(handle, 0o666 & ~_umask())  # as open() would create it (mkstemp: 0600)
        with os.fdopen(handle, "wb") as out:
            for piece in data:
                out.write(piece)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
